package postgres

import "testing"

// The advisory keys are shared with every other version of dblock on the
// same database: during a rolling upgrade, old and new reapers and
// acquires must take the same reap fence, and old and new Migrate calls
// the same migration lock. These are the keys dblock has always used.
func TestAdvisoryKeysStable(t *testing.T) {
	if got := build("lock_table", false, false).fenceKey; got != 8217068655526852140 {
		t.Errorf("reap fence key of lock_table = %d; changed from 8217068655526852140", got)
	}
	if got := advisoryKey("dblock.migrate:lock_table"); got != -8355453532561688065 {
		t.Errorf("migration lock key of lock_table = %d; changed from -8355453532561688065", got)
	}
}

func TestArrayLiterals(t *testing.T) {
	if got, want := textArray([]string{"a", `b"c`, `d\e`, "", "{x,y}", "NULL"}), `{"a","b\"c","d\\e","","{x,y}","NULL"}`; got != want {
		t.Errorf("textArray = %s, want %s", got, want)
	}
	if got := textArray(nil); got != "{}" {
		t.Errorf("textArray(nil) = %s", got)
	}
	if got, want := bigintArray([]int64{1, -2, 9007199254740993}), "{1,-2,9007199254740993}"; got != want {
		t.Errorf("bigintArray = %s, want %s", got, want)
	}
}
