package advisory

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// KeyID returns the PostgreSQL advisory lock key of key: the first 8 bytes of
// the SHA-256 digest of key's UTF-8 bytes, read as a big-endian two's
// complement int64. See the package documentation for a test vector and a
// SQL expression that computes the same value.
func KeyID(key string) int64 {
	sum := sha256.Sum256([]byte(key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// MaxNameLen is the longest MySQL/MariaDB lock name, in bytes, that LockName
// passes through unchanged. The servers accept 64 characters; counting bytes
// is stricter and easier to reproduce in other languages.
const MaxNameLen = 64

// hashPrefix marks lock names that are digests of their key.
const hashPrefix = "sha256:"

// LockName returns the MySQL/MariaDB GET_LOCK name of key: key itself when it
// is at most MaxNameLen bytes long and does not begin with "sha256:";
// otherwise "sha256:" followed by the first 57 lowercase hex digits of the
// SHA-256 digest of key (64 bytes in all). See the package documentation for
// the same rule in SQL.
func LockName(key string) string {
	if len(key) <= MaxNameLen && !strings.HasPrefix(key, hashPrefix) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:])[:MaxNameLen-len(hashPrefix)]
}
