package dblock

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
)

// ownerPrefix names this process in generated owner memos, for operators
// reading the lock table: host:pid.
var ownerPrefix = func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	if len(host) > 64 {
		host = host[:64]
	}
	return host + ":" + strconv.Itoa(os.Getpid()) + ":"
}()

// newOwner returns a fresh owner memo: host:pid: and 128 random bits from
// crypto/rand, so no other owner can guess it.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return ownerPrefix + hex.EncodeToString(b[:])
}
