// Package owner draws the owner memos of acquisitions made without Owner.
package owner

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"sync"
)

// Prefix names this process in generated owner memos, for operators
// reading the lock table: host:pid.
var Prefix = func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	if len(host) > 64 {
		host = host[:64]
	}
	return host + ":" + strconv.Itoa(os.Getpid()) + ":"
}()

// ownerBits hands out bytes from crypto/rand, read 4 KiB at a time: one
// system call per 256 owners instead of one per acquisition. Each byte is
// handed out once.
var ownerBits struct {
	mu   sync.Mutex
	buf  [4096]byte
	left int // unused bytes at the end of buf
}

// New returns a fresh owner memo: host:pid: and 128 random bits from
// crypto/rand, so no other owner can guess it.
func New() string {
	var b [16]byte
	ownerBits.mu.Lock()
	if ownerBits.left < len(b) {
		_, _ = rand.Read(ownerBits.buf[:]) // crypto/rand.Read never fails (Go 1.24+)
		ownerBits.left = len(ownerBits.buf)
	}
	used := ownerBits.buf[len(ownerBits.buf)-ownerBits.left:][:len(b)]
	copy(b[:], used)
	clear(used)
	ownerBits.left -= len(b)
	ownerBits.mu.Unlock()
	return Prefix + hex.EncodeToString(b[:])
}
