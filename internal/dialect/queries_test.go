package dialect

import "testing"

func TestParseQueries(t *testing.T) {
	q := ParseQueries(`-- a comment about the file
-- name: one
SELECT 1
-- a comment on the SQL
FROM t;

-- name: two
UPDATE t SET
  x = 1
`)
	if got := q.Get("one", nil); got != "SELECT 1\nFROM t;" {
		t.Errorf("one = %q", got)
	}
	if got := q.Get("two", nil); got != "UPDATE t SET\n  x = 1" {
		t.Errorf("two = %q", got)
	}
	for name, text := range map[string]string{
		"a name twice":     "-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n",
		"SQL without name": "SELECT 1\n",
		"an empty name":    "-- name:\nSELECT 1\n",
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			ParseQueries(text)
		}()
	}
	defer func() {
		if recover() == nil {
			t.Error("Get of a missing query: no panic")
		}
	}()
	q.Get("three", nil)
}
