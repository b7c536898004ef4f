package dblock

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/dblockhq/dblock/internal/keys"
)

const (
	// MaxKeyLen is the longest key, in bytes, that fits the key_id column.
	MaxKeyLen = 255
	// MaxOwnerLen is the longest owner memo, in bytes, that fits the memo column.
	MaxOwnerLen = 255
	// MaxTableLen is the longest table name accepted by WithTable. It leaves
	// room for the derived names (table_token_seq, table_fence_bd, ...) within
	// the 63-byte identifier limit of PostgreSQL and MySQL's 64.
	MaxTableLen = 48
	// MinTTL and MaxTTL bound every lease.
	MinTTL = 100 * time.Millisecond
	// MaxTTL is the longest lease accepted.
	MaxTTL = 30 * 24 * time.Hour
	// DefaultTTL is the lease used when WithTTL is not given.
	DefaultTTL = 30 * time.Second
	// DefaultTable is the lock table's name when WithTable is not given.
	DefaultTable = "lock_table"
)

var tableRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateKey reports why key cannot name a lock, or nil if it can. The error
// wraps ErrInvalidKey.
func ValidateKey(key string) error {
	return keys.Text("key", key, MaxKeyLen)
}

// reservedPrefixes start the keys of the rows dblock names itself: shared
// locks (RLock, WLock), semaphores and elections, each with what to use
// instead. They are part of the table's format, shared by every dblock
// version, and no plain key starts with one.
var reservedPrefixes = []struct{ prefix, use string }{
	{rwPrefix, "shared locks (use RLock, WLock)"},
	{semaphorePrefix, "semaphores (use NewSemaphore)"},
	{electionPrefix, "elections (use NewElection)"},
}

// ValidatePlainKey reports why key cannot name a plain lock (Lock, TryLock,
// Do, LockTx, TryLockTx, LockAll, TryLockAll), or nil if it can: the reasons
// of ValidateKey, or a key that starts with a prefix reserved for the rows of
// shared locks ("rw/"), semaphores ("semaphore/") or elections
// ("election/"), which a plain lock would otherwise share. Get and
// ForceUnlock accept such keys, to inspect or break those rows by hand. The
// error wraps ErrInvalidKey.
func ValidatePlainKey(key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	for _, r := range reservedPrefixes {
		if strings.HasPrefix(key, r.prefix) {
			return fmt.Errorf("%w: key %q starts with %q, reserved for %s", ErrInvalidKey, key, r.prefix, r.use)
		}
	}
	return nil
}

// ValidateTable reports why name cannot be used as a lock table name, or nil.
// Accepted names match ^[A-Za-z_][A-Za-z0-9_]*$ and are at most MaxTableLen
// bytes; they are always quoted in SQL as well. The error wraps
// ErrInvalidOption.
func ValidateTable(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: table name is empty", ErrInvalidOption)
	case len(name) > MaxTableLen:
		return fmt.Errorf("%w: table name is %d bytes, longer than %d", ErrInvalidOption, len(name), MaxTableLen)
	case !tableRE.MatchString(name):
		return fmt.Errorf("%w: table name %q must match %s", ErrInvalidOption, name, tableRE)
	}
	return nil
}

func validateTTL(what string, d time.Duration) error {
	if d < MinTTL || d > MaxTTL {
		return fmt.Errorf("%w: %s %v out of range [%v, %v]", ErrInvalidOption, what, d, MinTTL, MaxTTL)
	}
	return nil
}
