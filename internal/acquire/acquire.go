// Package acquire is how a Locker takes and releases rows on one dialect:
// a take in place for a key whose row it has lately seen, else the upsert,
// and both combined with the Locker's concurrent calls when the dialect can
// (internal/combine). The dialect says which statements exist; the state
// of one Locker (row hints, queued calls) lives here.
package acquire

import (
	"context"
	"time"

	"github.com/dblockhq/dblock/internal/combine"
	"github.com/dblockhq/dblock/internal/dialect"
)

// Strategy makes one Locker's acquires and releases.
type Strategy struct {
	d               dialect.Dialect
	batch           dialect.Batch // nil: the dialect combines nothing
	combining       bool          // calls may be combined (not WithoutCombining)
	rows            *hints
	takes, releases *combine.Combiner
}

// New returns the Strategy of d; with combining false every call runs
// alone. bound caps a combined statement's run once its callers' contexts
// have ended.
func New(d dialect.Dialect, combining bool, bound time.Duration) *Strategy {
	s := &Strategy{d: d, rows: newHints(), combining: combining}
	if b := d.Batch(); b != nil && d.TakesInPlace() {
		s.batch = b
		s.takes = combine.New(s.one, b.Many, b.Shared(), bound)
		s.releases = s.takes
		if !b.Shared() {
			s.releases = combine.New(s.one, b.Many, false, bound)
		}
	}
	return s
}

// one runs a call alone.
func (s *Strategy) one(ctx context.Context, q dialect.Querier, c *dialect.Call) {
	if c.Release {
		c.OK, c.Freed, c.Err = s.d.Release(ctx, q, c.Key, c.Owner, c.Token)
		return
	}
	c.Token, c.OK, c.Err = s.d.Take(ctx, q, c.Key, c.Owner, c.TTL, nil, c.Token)
}

// Acquire takes key for owner with value data (nil: none); combined says
// whether the take may ride a combined statement (not for an explicit
// owner, which another Locker may share). A take with data runs alone.
func (s *Strategy) Acquire(ctx context.Context, q dialect.Querier, key, owner string, ttl time.Duration, data []byte, combined bool) (int64, bool, error) {
	if !s.d.TakesInPlace() {
		return s.d.Upsert(ctx, q, key, owner, ttl, data)
	}
	take := func() (int64, bool, error) {
		if combined && data == nil && s.combining && s.takes != nil {
			last := s.rows.lastToken(key)
			if last != 0 || !s.batch.NeedsLastToken() {
				return s.takes.Take(ctx, q, key, owner, ttl, last)
			}
		}
		return s.d.Take(ctx, q, key, owner, ttl, data, s.rows.lastToken(key))
	}
	return s.rows.acquireVia(key, take,
		func() (int64, bool, error) { return s.d.Upsert(ctx, q, key, owner, ttl, data) },
		func() (bool, error) {
			_, held, err := s.d.Held(ctx, q, key, owner)
			return held, err
		})
}

// Release takes one level off the acquisition (key, owner, token);
// combined as for Acquire.
func (s *Strategy) Release(ctx context.Context, q dialect.Querier, key, owner string, token int64, combined bool) (bool, error) {
	var ok, freed bool
	var err error
	if combined && s.combining && s.releases != nil {
		ok, freed, err = s.releases.Release(ctx, q, key, owner, token)
	} else {
		ok, freed, err = s.d.Release(ctx, q, key, owner, token)
	}
	if freed {
		s.rows.released(key, token)
	}
	return ok, err
}

// Combiners returns the combiners of takes and releases (the same one when
// the dialect shares them), nil when the dialect combines nothing.
func (s *Strategy) Combiners() (takes, releases *combine.Combiner) { return s.takes, s.releases }
