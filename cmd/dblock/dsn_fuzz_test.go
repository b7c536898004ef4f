package main

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/dblockhq/dblock"
	"github.com/go-sql-driver/mysql"
)

// pwSlot marks where FuzzParseDSN puts its password in a DSN: after
// scheme:[//]user: (followed by an @) or after a ?password= or &password=
// parameter.
const pwSlot = "{pw}"

var (
	userinfoPW  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:(//)?[^/?#@]*:$`)
	userinfoEnd = regexp.MustCompile(`^[^/?#]*@`) // without an @, user:x is host:port
	queryPW     = regexp.MustCompile(`[?&]password=$`)
	// the MySQL driver's own form: user:{pw}@tcp(…) or @unix(…)
	nativeUser = regexp.MustCompile(`^[^:@/()]*:$`)
	nativeAddr = regexp.MustCompile(`^@(tcp|unix)\(`)
)

// FuzzParseDSN: parseDSN never panics; it either fails with a clear error or
// names a dialect and yields a DSN its driver accepts; and a password put in
// the DSN (at {pw}, escaped as a URL needs it) appears neither in the error
// nor in the redacted form, raw or escaped.
func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{
		"postgres://app:{pw}@db.example:5433/locks?sslmode=disable",
		"postgresql://app@127.0.0.1/locks?password={pw}",
		"mysql://root:{pw}@127.0.0.1:3307/test?parseTime=true",
		"mysql://us%40er:{pw}@[::1]/app?timeout=2s",
		"mysql://u:{pw}@host/db?timeout=forever",
		"postgres://u:{pw}@host:port/db",
		"postgres://u:{pw}@%zz/db",
		"mysql://u:{pw}@/db",
		"oracle://u:{pw}@h/db",
		"sqlite:/var/lib/dblock.db",
		"root:{pw}@tcp(127.0.0.1:3306)/test",
		"root:{pw}@tcp(127.0.0.1:3306)/test?parseTime=maybe",
		"root:{pw}@unix(/run/mysqld.sock)/",
		"",
	} {
		f.Add(s, "s3cret-Pw")
	}
	f.Add("postgres://u:{pw}@h/db", "p@ss/w:rd?#&=+%")
	f.Fuzz(func(t *testing.T, dsn, pw string) {
		checkParse(t, dsn)
		before, after, ok := strings.Cut(dsn, pwSlot)
		if !ok || strings.Contains(after, pwSlot) || len(pw) < minSecret {
			return
		}
		var esc string
		switch {
		case userinfoPW.MatchString(before) && userinfoEnd.MatchString(after):
			esc = url.UserPassword("", pw).String()[1:]
		case queryPW.MatchString(before):
			esc = url.QueryEscape(pw)
		case nativeUser.MatchString(before) && nativeAddr.MatchString(after):
			if strings.ContainsAny(pw, "@/()?") {
				return // moves where the driver's parser cuts the DSN
			}
			esc = pw // the driver's form is not escaped
		default:
			return // {pw} is not where a password goes
		}
		// A password that the output holds anyway (it spells part of a
		// message or of the host) proves nothing.
		blank := checkParse(t, before+after)
		for _, s := range []string{pw, esc} {
			if strings.Contains(blank, s) || strings.Contains(before+after, s) {
				return
			}
		}
		out := checkParse(t, before+esc+after)
		for _, s := range []string{pw, esc} {
			if strings.Contains(out, s) {
				t.Fatalf("parseDSN(%q) shows the password %q: %s", before+esc+after, s, out)
			}
		}
	})
}

// checkParse parses dsn, checks that the outcome is an error that says what
// is wrong or a usable target, and returns what parseDSN lets be printed:
// the error text or the redacted DSN.
func checkParse(t *testing.T, dsn string) string {
	t.Helper()
	tg, err := parseDSN(dsn)
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "unsupported DSN ") && !strings.HasPrefix(msg, "malformed DSN ") {
			t.Fatalf("parseDSN(%q) = %q: not a clear error", dsn, msg)
		}
		return msg + "\n" + tg.redacted
	}
	switch {
	case tg.dialect == dblock.SQLite && tg.lite != "" && tg.pg == nil && tg.my == nil:
	case tg.dialect == dblock.Postgres && tg.pg != nil && tg.my == nil:
	case tg.dialect == dblock.MySQL && tg.my != nil && tg.pg == nil:
		if _, err := mysql.ParseDSN(tg.driverDSN()); err != nil {
			t.Fatalf("parseDSN(%q): driver DSN %q: %v", dsn, tg.driverDSN(), err)
		}
	default:
		t.Fatalf("parseDSN(%q) = dialect %q, pg %v, my %v", dsn, tg.dialect, tg.pg != nil, tg.my != nil)
	}
	if tg.redacted == "" || tg.driverDSN() == "" {
		t.Fatalf("parseDSN(%q): redacted %q, driver DSN %q", dsn, tg.redacted, tg.driverDSN())
	}
	db, err := tg.open()
	if err != nil {
		t.Fatalf("parseDSN(%q): open: %v", dsn, err)
	}
	db.Close()
	return tg.redacted
}
