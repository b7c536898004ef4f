package dialect_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	"github.com/dblockhq/dblock/internal/dialect"
	"github.com/dblockhq/dblock/internal/dialect/mysql"
)

// MySQL's bells: a session holds the names of keys and a bell, other
// sessions read who holds a key and which bell, and a ring wakes a session
// blocked on the bell. TiDB, Galera and portable mode have none.
func TestBells(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := dbtest.Open(t, dblock.MySQL)
	table := dbtest.Table(t, db, dblock.MySQL)
	conn := func() *sql.Conn {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	if _, err := mysql.New(dialect.Config{Table: table, Portable: true}).(dialect.Bells).OpenBell(ctx, conn()); !errors.Is(err, dialect.ErrNoNotify) {
		t.Errorf("OpenBell in portable mode: %v, want ErrNoNotify", err)
	}
	d := mysql.New(dialect.Config{Table: table}).(dialect.Bells)
	bell, ear := conn(), conn()
	id, err := d.OpenBell(ctx, bell)
	if e := dbtest.Engine(t, db, dblock.MySQL); e.Distributed() {
		if !errors.Is(err, dialect.ErrNoNotify) {
			t.Errorf("OpenBell on %s: %v, want ErrNoNotify", e, err)
		}
		return
	}
	if err != nil || id == 0 {
		t.Fatalf("OpenBell = %d, %v", id, err)
	}
	keys := []string{"a", "b", "c"}
	holders := func(want ...int64) {
		t.Helper()
		got, err := d.Holders(ctx, db, keys)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Holders = %v, %v; want %v", got, err, want)
		}
	}
	index := func(want int) {
		t.Helper()
		got, err := d.BellIndex(ctx, db, []int64{id, id + 1})
		if err != nil || !slices.Equal(got, []int{want, -1}) {
			t.Errorf("BellIndex = %v, %v; want [%d -1]", got, err, want)
		}
	}
	holders(0, 0, 0)
	index(0)
	held, cur, err := d.UpdateBells(ctx, bell, id, keys[:2], nil, false, 0)
	if err != nil || !slices.Equal(held, []bool{true, true}) || cur != 0 {
		t.Fatalf("UpdateBells(hold a, b) = %v, %d, %v", held, cur, err)
	}
	holders(id, id, 0)
	// Another session cannot take a held name.
	if held, _, err := d.UpdateBells(ctx, ear, id+1, keys[1:2], nil, false, 0); err != nil || held[0] {
		t.Errorf("a second session took b's name: %v, %v", held, err)
	}
	rung := make(chan error, 1)
	go func() {
		ok, err := d.WaitBell(ctx, ear, id, 0, 30*time.Second)
		if err == nil && !ok {
			err = errors.New("not rung: timed out")
		}
		rung <- err
	}()
	// The listener may not be blocked yet: either way the ring frees bell
	// 0, which it then takes at once.
	if _, cur, err = d.UpdateBells(ctx, bell, id, nil, keys[:1], true, cur); err != nil || cur != 1 {
		t.Fatalf("the ring: bell %d, %v; want 1", cur, err)
	}
	if err := <-rung; err != nil {
		t.Fatal(err)
	}
	holders(0, id, 0)
	index(1)
	// A timeout is not a ring.
	if ok, err := d.WaitBell(ctx, ear, id, 1, time.Second); ok || err != nil {
		t.Errorf("WaitBell on a bell nobody rings = %v, %v; want false, nil", ok, err)
	}
}
