package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
)

func TestParseDSN(t *testing.T) {
	tests := []struct {
		dsn      string
		dialect  dblock.Dialect
		driver   string // the driver-form DSN, for MySQL
		redacted string
	}{
		{
			dsn:      "postgres://app:s3cret@db.example:5433/locks?sslmode=disable",
			dialect:  dblock.Postgres,
			redacted: "postgres://app:xxxxx@db.example:5433/locks?sslmode=disable",
		},
		{
			dsn:      "postgresql://app@127.0.0.1/locks",
			dialect:  dblock.Postgres,
			redacted: "postgresql://app@127.0.0.1/locks",
		},
		{
			dsn:      "postgres://app@db/locks?password=s3cret",
			dialect:  dblock.Postgres,
			redacted: "postgres://app@db/locks?password=xxxxx",
		},
		{
			dsn:      "mysql://root:s3cret@127.0.0.1:3307/test?parseTime=true",
			dialect:  dblock.MySQL,
			driver:   "root:s3cret@tcp(127.0.0.1:3307)/test?parseTime=true&timeout=10s",
			redacted: "mysql://root:xxxxx@127.0.0.1:3307/test?parseTime=true",
		},
		{
			// user and password are URL-unescaped; the default port is 3306.
			dsn:      "mysql://us%40er:p%40ss%2Fw%3Ard@db.internal/app",
			dialect:  dblock.MySQL,
			driver:   "us@er:p@ss/w:rd@tcp(db.internal:3306)/app?timeout=10s",
			redacted: "mysql://us%40er:xxxxx@db.internal/app",
		},
		{
			// a pair url.ParseQuery cannot read is redacted all the same.
			dsn:      "postgres://app@db/locks?sslmode=disable&pass%77ord=s3cret;x&Password=s3cret",
			dialect:  dblock.Postgres,
			redacted: "postgres://app@db/locks?sslmode=disable&pass%77ord=xxxxx&Password=xxxxx",
		},
		{
			// a DSN missing its ? shows no password parameter.
			dsn:      "postgres://app&Password=s3cret@db/locks&password=s3cret",
			dialect:  dblock.Postgres,
			redacted: "postgres://xxxxx@db/xxxxx",
		},
		{
			// the fragment is dropped: no driver reads it.
			dsn:      "postgres://app@h1:5432,h2:5433/locks#s3cret",
			dialect:  dblock.Postgres,
			redacted: "postgres://app@h1:5432,h2:5433/locks",
		},
		{
			// go-sql-driver's own form, as DBLOCK_MYSQL_DSN and README write it.
			dsn:      "root:s3cret@tcp(127.0.0.1:3307)/test?parseTime=true",
			dialect:  dblock.MySQL,
			driver:   "root:s3cret@tcp(127.0.0.1:3307)/test?parseTime=true&timeout=10s",
			redacted: "root:xxxxx@tcp(127.0.0.1:3307)/test?parseTime=true",
		},
		{
			dsn:      "root@unix(/run/mysqld/mysqld.sock)/test",
			dialect:  dblock.MySQL,
			driver:   "root@unix(/run/mysqld/mysqld.sock)/test?timeout=10s",
			redacted: "root@unix(/run/mysqld/mysqld.sock)/test",
		},
		{
			dsn:      "mysql://root@[::1]:3306/test?timeout=2s",
			dialect:  dblock.MySQL,
			driver:   "root@tcp([::1]:3306)/test?timeout=2s",
			redacted: "mysql://root@[::1]:3306/test?timeout=2s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.dsn, func(t *testing.T) {
			got, err := parseDSN(tt.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if got.dialect != tt.dialect || got.redacted != tt.redacted {
				t.Errorf("dialect %s, redacted %q; want %s, %q", got.dialect, got.redacted, tt.dialect, tt.redacted)
			}
			if tt.driver != "" && got.driverDSN() != tt.driver {
				t.Errorf("driver DSN %q, want %q", got.driverDSN(), tt.driver)
			}
			if got.my != nil && got.my.Timeout == 0 {
				t.Errorf("MySQL dial timeout not set")
			}
			if db, err := got.open(); err != nil {
				t.Errorf("open: %v", err)
			} else {
				db.Close()
			}
		})
	}
}

func TestParseDSNErrors(t *testing.T) {
	tests := []struct {
		dsn  string
		want string // in the error
	}{
		{"", "unsupported DSN (no scheme)"},
		{"root@127.0.0.1:3306/test", "unsupported DSN (no scheme)"},
		{"root:s3cret@tcp(127.0.0.1:3306/test", "malformed DSN root:…: invalid DSN: network address not terminated"},
		{"root:s3cret@tcp(127.0.0.1:3306)/", "want one database name"},
		{"root:s3cret@tcp(127.0.0.1:3306)/test?timeout=forever", "malformed DSN root:…"},
		{"oracle://u:s3cret@h/db", "unsupported DSN oracle://…"},
		{"sqlite:", "want sqlite:PATH"},
		{"sqlite:x.db?mode=memory", "the path may not contain ?"},
		{"postgres://u:s3cret@host:port/db", "malformed DSN postgres://…: invalid port after host"},
		{"postgres://u:s3cret@%zz/db", "malformed DSN postgres://…"},
		{"postgres:relative", "want postgres://[user[:password]@]host[:port]/database"},
		{"postgres:u:s3cret@host/db", "malformed DSN postgres:…: want postgres://"},
		{"mysql://u:s3cret@/db", "want mysql://[user[:password]@]host[:port]/database"},
		{"mysql://u:s3cret@host", "want one database name"},
		{"mysql://u:s3cret@host/a/b", "want one database name"},
		{"mysql://u:s3cret@host/db?timeout=forever", "malformed DSN mysql://u:xxxxx@host/db?timeout=forever"},
		{"postgres://u:s3cret@host/db?sslmode=bogus", "malformed DSN postgres://u:xxxxx@host/db?sslmode=bogus"},
		{"postgres://db.example&password=s3cret/db", "malformed DSN postgres://…: the host may hold only"},
		{"postgres:#&password=s3cret", "malformed DSN postgres:…: want postgres://"},
		// An @ left unescaped in a password: the parsers split the DSN at
		// different @s, and a driver's error then showed the rest of it.
		{"postgres://u:s3cret@s3cret@127.0.0.1:5432/test", "malformed DSN postgres://…: more than one @"},
		{"mysql://u:s3cret@s3cret/x@127.0.0.1:3306/db", "malformed DSN mysql://…: more than one @"},
		{"mysql://u:p@s3cret/w:rd?x#y@127.0.0.1/db", "malformed DSN mysql://…: more than one @"},
	}
	for _, tt := range tests {
		t.Run(tt.dsn, func(t *testing.T) {
			_, err := parseDSN(tt.dsn)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "s3cret") {
				t.Errorf("error %q shows the password", msg)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want it to contain %q", msg, tt.want)
			}
		})
	}
	if tg, err := parseDSN("sqlite:/var/lib/dblock.db"); err != nil || tg.dialect != dblock.SQLite ||
		tg.driverDSN() != "file:/var/lib/dblock.db?"+sqliteParams {
		t.Errorf("sqlite:PATH = %+v, %v", tg, err)
	}
}

func TestScrubber(t *testing.T) {
	var b strings.Builder
	s := &scrubber{w: &b}
	s.hide("p@ss/w")
	s.hide("ab") // too short to scrub
	if _, err := s.Write([]byte("x p@ss/w y p%40ss%2Fw z ab " + (time.Second).String())); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "x xxxxx y xxxxx z ab 1s"; got != want {
		t.Errorf("scrubbed %q, want %q", got, want)
	}
}
