// Package keys is how dblock's primitives name their rows in the lock
// table: an election's leadership, a semaphore's permits, a shared key's
// readers and writer, each under a prefix that plain keys cannot take;
// and, from a key, what it stands for (Describe) and which rows keep a
// waiter for it waiting (Blocks); and which texts may name a key, an owner
// or a primitive (Text, NameErr). It holds no state.
package keys

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dblockhq/dblock/internal/dberr"
)

// The prefixes and the waiter slot of the primitives' keys.
const (
	Election  = "election/"  // election/<name>: the leadership
	Semaphore = "semaphore/" // semaphore/<name>/<i>: permit i
	Shared    = "rw/"        // rw/<key>/w: the writer; rw/<key>/r/<i>: reader i
	// WaitSlot ends the key of a waiter's record that waits for any
	// permit (semaphore/<name>/*).
	WaitSlot = "*"
)

// The kinds of keys (dblock.Kind).
const (
	Lock   = "lock"
	Leader = "leader"
	Permit = "permit"
	Reader = "reader"
	Writer = "writer"
)

// Describe returns what key stands for: its kind, the name the program
// gave, and the permit's or reader's number (-1: none, or a waiter's
// record that waits for any of them). A primitive's prefix with an empty
// name ("election/", "rw//w") names no primitive (NewElection, NewSemaphore
// and RLock refuse an empty name, as ValidateKey does): it is described as
// the key it is, Lock.
func Describe(key string) (kind, name string, slot int) {
	if kind, name, slot = describe(key); name == "" {
		return Lock, key, -1
	}
	return kind, name, slot
}

// Name is how errors name key: a plain key quoted, a primitive's row as
// what it is ("reader 3 of "k"", "writer of "k"", "election "e"",
// "permit 2 of semaphore "s""), never by its key in the table.
func Name(key string) string {
	kind, name, slot := Describe(key)
	switch {
	case kind == Leader:
		return fmt.Sprintf("election %q", name)
	case kind == Permit && slot >= 0:
		return fmt.Sprintf("permit %d of semaphore %q", slot, name)
	case kind == Permit:
		return fmt.Sprintf("semaphore %q", name)
	case kind == Writer:
		return fmt.Sprintf("writer of %q", name)
	case kind == Reader && slot >= 0:
		return fmt.Sprintf("reader %d of %q", slot, name)
	case kind == Reader:
		return fmt.Sprintf("readers of %q", name)
	}
	return fmt.Sprintf("%q", key)
}

// describe is Describe, empty names included.
func describe(key string) (kind, name string, slot int) {
	if name, ok := strings.CutPrefix(key, Election); ok {
		return Leader, name, -1
	}
	if rest, ok := strings.CutPrefix(key, Semaphore); ok {
		if name, ok := strings.CutSuffix(rest, "/"+WaitSlot); ok {
			return Permit, name, -1
		}
		if name, n, ok := cutSlot(rest); ok {
			return Permit, name, n
		}
	}
	if rest, ok := strings.CutPrefix(key, Shared); ok {
		if name, ok := strings.CutSuffix(rest, "/w"); ok {
			return Writer, name, -1
		}
		if name, ok := strings.CutSuffix(rest, "/r"); ok {
			return Reader, name, -1
		}
		if name, n, ok := cutSlot(rest); ok {
			if name, ok := strings.CutSuffix(name, "/r"); ok {
				return Reader, name, n
			}
		}
	}
	return Lock, key, -1
}

// Blocks reports whether a live row of key keeps a call waiting for
// waited (a waiter record's key) waiting.
func Blocks(key, waited string) bool {
	if key == waited {
		return true
	}
	wk, wn, _ := Describe(waited)
	kk, kn, _ := Describe(key)
	if wn != kn {
		return false
	}
	switch wk {
	case Permit:
		return kk == Permit && strings.HasPrefix(key, Semaphore)
	case Reader:
		return kk == Writer
	case Writer:
		return kk == Reader
	}
	return false
}

// cutSlot splits "name/N" into name and N, N a decimal number without
// leading zeros.
func cutSlot(s string) (string, int, bool) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 || i == len(s)-1 || len(s)-i > 8 || (s[i+1] == '0' && len(s)-i > 2) {
		return "", 0, false
	}
	n := 0
	for _, ch := range s[i+1:] {
		if ch < '0' || ch > '9' {
			return "", 0, false
		}
		n = n*10 + int(ch-'0')
	}
	return s[:i], n, true
}

// Text reports why s cannot be what (a key, an owner memo) of at most max
// bytes, or nil: it is empty, too long, not valid UTF-8, or holds a NUL
// byte. The error wraps dberr.ErrInvalidKey.
func Text(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", dberr.ErrInvalidKey, what)
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", dberr.ErrInvalidKey, what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", dberr.ErrInvalidKey, what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", dberr.ErrInvalidKey, what)
	}
	return nil
}

// ElectionName reports why name cannot name an election whose keys are at
// most max bytes (NewElection's rule: not empty, and Election+name a valid
// key), or nil. The error wraps dberr.ErrInvalidKey.
func ElectionName(name string, max int) error {
	if name == "" {
		return fmt.Errorf("%w: empty election name", dberr.ErrInvalidKey)
	}
	if err := Text("key", Election+name, max); err != nil {
		return NameErr("election", name, err)
	}
	return nil
}

// NameErr is the error of a primitive's name (kind: "semaphore",
// "election") whose key err refuses: "dblock: semaphore name \"x\":
// invalid key: ...", said once, wrapping err.
func NameErr(kind, name string, err error) error {
	return dberr.Errorf("dblock: %s name %q: %w", kind, name, err)
}
