package dblock

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzValidateKey: a key is accepted exactly when it is 1..MaxKeyLen bytes
// of UTF-8 without NUL; a rejection wraps ErrInvalidKey; nothing panics.
func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"", "k", "a\x00b", "\xff", strings.Repeat("é", 128), "'; DROP TABLE x; --", "ключ-🔒"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidateKey(key)
		valid := key != "" && len(key) <= MaxKeyLen && utf8.ValidString(key) && !strings.ContainsRune(key, 0)
		if valid != (err == nil) {
			t.Fatalf("ValidateKey(%q) = %v, valid = %v", key, err, valid)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("ValidateKey(%q) = %v, not ErrInvalidKey", key, err)
		}
	})
}

// FuzzValidateTable: an accepted table name is a plain identifier, so the
// SQL built from it holds it only between the dialect's quotes, with no
// quote, space, semicolon or comment marker of its own.
func FuzzValidateTable(f *testing.F) {
	for _, s := range []string{"lock_table", "", "1a", "a-b", `a"b`, "a`b", "a;b", "a b", "a--b", "public.locks", strings.Repeat("a", 49), "tâble"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateTable(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("ValidateTable(%q) = %v, not ErrInvalidOption", name, err)
			}
			return
		}
		if strings.ContainsAny(name, "\"`'; \t\n\\-./*") || len(name) > MaxTableLen {
			t.Fatalf("ValidateTable accepted %q", name)
		}
		for _, d := range []dialect{newPostgres(name), newMySQL(name)} {
			q := d.quote(name)
			if strings.Count(q, name) != 1 || len(q) != len(name)+2 {
				t.Fatalf("quote(%q) = %q", name, q)
			}
		}
	})
}
