package faultsuite

import (
	"encoding/json"
	"os"
	"strconv"
	"time"

	"github.com/dblockhq/dblock"
)

// Environment variables.
const (
	longEnv   = "DBLOCK_FAULT_LONG"   // "1": the long local run
	seedEnv   = "DBLOCK_FAULT_SEED"   // replays the fault schedule of a logged seed
	workerEnv = "DBLOCK_FAULT_WORKER" // JSON workerSpec: turns TestWorkerProcess into a worker
	// "1": every Locker and the migration in portable mode (WithPortable)
	portableEnv = "DBLOCK_FAULT_PORTABLE"
	// "1": every worker's Locker WithFIFO (waiters across processes in
	// ticket order)
	fifoEnv = "DBLOCK_FAULT_FIFO"
	// a count: the acquisitions per database, instead of runSize's
	// (scripts/test.sh gives TiDB's slower run 5,000)
	acquisitionsEnv = "DBLOCK_FAULT_ACQUISITIONS"
)

// size is how big a run is.
type size struct {
	procs        int           // worker processes
	holders      int           // holder goroutines per process
	keys         int           // shared keys
	acquisitions int           // per database: the run ends once this many were reported
	limit        time.Duration // per database: the run ends then (and fails with under a tenth of its acquisitions)
	faultEvery   time.Duration // mean time between faults
}

func runSize() size {
	if os.Getenv(longEnv) == "1" {
		return size{procs: 6, holders: 4, keys: 6, acquisitions: 60_000, limit: 20 * time.Minute, faultEvery: 300 * time.Millisecond}
	}
	sz := size{procs: 4, holders: 4, keys: 4, acquisitions: 10_000, limit: 6 * time.Minute, faultEvery: 800 * time.Millisecond}
	if os.Getenv(fifoEnv) == "1" {
		// Strict order hands a key over at 0.3–0.5 of the rate without
		// it: 5,000 acquisitions take about as long, under as many
		// faults, as the plain run's 10,000 (4–5 minutes per database
		// with 10,000 in a CI rehearsal, against 2–2.5).
		sz.acquisitions = 5_000
	}
	if n, err := strconv.Atoi(os.Getenv(acquisitionsEnv)); err == nil && n > 0 {
		sz.acquisitions = n
	}
	return sz
}

// Lease settings of every worker: short, so a killed holder's key comes back
// quickly and faults outlast leases.
const (
	ttl       = time.Second
	heartbeat = 250 * time.Millisecond
	// takeoverSlack is what a takeover usually takes beyond TTL +
	// heartbeat (scheduling and the waiters' polling): takeovers slower
	// than that are counted and logged, not failed, since a busy machine
	// (or TiDB under load, whose statements can wait seconds) makes them.
	takeoverSlack = 3 * time.Second
	// takeoverLimit is how long a killed holder's key may stay unavailable
	// before the run fails: a lock that does not expire, not a slow one.
	takeoverLimit = 30 * time.Second
)

// seed returns the run's seed: DBLOCK_FAULT_SEED, or one from the clock.
func seed() (int64, error) {
	if s := os.Getenv(seedEnv); s != "" {
		return strconv.ParseInt(s, 10, 64)
	}
	return time.Now().UnixNano(), nil
}

// workerSpec tells a worker process what to do; it travels as JSON in
// workerEnv.
type workerSpec struct {
	Name      string         // unique per process: "w<slot>g<generation>"
	Dialect   dblock.Dialect // which database
	Table     string         // lock table
	Guard     string         // guard table: key -> last accepted token
	Intervals string         // hold intervals
	Keys      []string
	Holders   int
	Seed      int64
	MaxRun    time.Duration // the worker gives up after this even if its parent lives
	Portable  bool          // WithPortable
	FIFO      bool          // WithFIFO
	// DSN, when set, is dialed directly instead of through a fault proxy
	// (the failover suite's multi-host DSN): cut and stall do nothing.
	DSN string
	// NodeDSN, when set (MySQL), is the server the worker's proxy leads to
	// (a cluster's node) instead of DBLOCK_MYSQL_DSN.
	NodeDSN string
}

func (s workerSpec) encode() string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return string(b)
}

func decodeSpec(raw string) (workerSpec, error) {
	var s workerSpec
	err := json.Unmarshal([]byte(raw), &s)
	return s, err
}
