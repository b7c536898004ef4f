package dblock

import (
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/migrate"
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
	refs := map[Dialect][]string{}
	for name, d := range dialects {
		refs[name] = statements(f, d, refTable)
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
		for _, d := range []dialect.Dialect{dialects[Postgres](dialect.Config{Table: name}), dialects[MySQL](dialect.Config{Table: name})} {
			q := d.Quote(name)
			if strings.Count(q, name) != 1 || len(q) != len(name)+2 {
				t.Fatalf("quote(%q) = %q", name, q)
			}
		}
		for d, ref := range refs {
			checkNameOnlyQuoted(t, ref, statements(t, dialects[d], name), name)
		}
	})
}

// refTable is a table name that spells nothing else in dblock's SQL.
const refTable = "zq_ref_table_zq"

// quotedRef matches refTable, or a name derived from it, with the
// characters around it.
var quotedRef = regexp.MustCompile(`(.)` + refTable + `\w*(.)`)

// checkNameOnlyQuoted checks every statement dblock builds for table name
// (those the dialect keeps, its migrations, its version bookkeeping): each
// is the statement built for refTable with refTable replaced by name, and in
// those, refTable appears only inside quotes ("", “ or ”).
func checkNameOnlyQuoted(t *testing.T, ref, got []string, name string) {
	t.Helper()
	if len(got) != len(ref) {
		t.Fatalf("table %q: %d statements, %d for %q", name, len(got), len(ref), refTable)
	}
	for i, r := range ref {
		if want := strings.ReplaceAll(r, refTable, name); got[i] != want {
			t.Fatalf("table %q: statement differs from the reference:\n%s\nwant\n%s", name, got[i], want)
		}
		if strings.Count(r, refTable) != len(quotedRef.FindAllString(r, -1)) {
			t.Fatalf("%q found at a string's edge in %s", refTable, r)
		}
		for _, m := range quotedRef.FindAllStringSubmatch(r, -1) {
			if open, end := m[1], m[2]; open != end || !strings.Contains("\"`'", open) {
				t.Fatalf("table name not quoted (%s) in\n%s", m[0], r)
			}
		}
	}
}

// statements lists the SQL text a dialect builds for table.
// They are those the dialect keeps, its migrations and its version
// bookkeeping.
func statements(t testing.TB, f func(dialect.Config) dialect.Dialect, table string) []string {
	d := f(dialect.Config{Table: table})
	var out []string
	collectStrings(reflect.ValueOf(d), &out)
	out = slices.DeleteFunc(out, func(s string) bool { return s == table }) // the name itself, not SQL
	create, insert := d.VersionSQL()
	out = append(out, create, insert)
	migs, err := migrate.Load(d, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migs {
		out = append(out, m.Statements...)
	}
	return out
}

// collectStrings appends every string reachable from v through pointers,
// interfaces, structs and slices.
func collectStrings(v reflect.Value, out *[]string) {
	switch v.Kind() {
	case reflect.String:
		*out = append(*out, v.String())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectStrings(v.Elem(), out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			collectStrings(v.Field(i), out)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			collectStrings(v.Index(i), out)
		}
	}
}
