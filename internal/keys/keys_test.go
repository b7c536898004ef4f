package keys

import "testing"

func TestName(t *testing.T) {
	for key, want := range map[string]string{
		"k":                `"k"`,
		"election/e":       `election "e"`,
		"semaphore/s/2":    `permit 2 of semaphore "s"`,
		"semaphore/s/*":    `semaphore "s"`,
		"rw/k/w":           `writer of "k"`,
		"rw/k/r/54":        `reader 54 of "k"`,
		"rw/k/r":           `readers of "k"`,
		"election/":        `"election/"`, // no name: the key it is
		"rw/a/b/w":         `writer of "a/b"`,
		"semaphore/s/x":    `"semaphore/s/x"`,
		"semaphore/s/2/r0": `"semaphore/s/2/r0"`,
	} {
		if got := Name(key); got != want {
			t.Errorf("Name(%q) = %s, want %s", key, got, want)
		}
	}
}
