package mysql

import "testing"

// Mid-ring a session holds two bells: the one it releases next is the one
// whose predecessor it does not hold.
func TestHeldBell(t *testing.T) {
	for _, c := range []struct {
		used []int64
		want int
	}{
		{[]int64{5, 0, 0}, 0},
		{[]int64{0, 5, 0}, 1},
		{[]int64{0, 0, 5}, 2},
		{[]int64{5, 5, 0}, 0},
		{[]int64{0, 5, 5}, 1},
		{[]int64{5, 0, 5}, 2},
		{[]int64{0, 0, 0}, -1},
		{[]int64{7, 7, 7}, -1},
		{[]int64{5, 5, 5}, 0},
	} {
		if got := heldBell(5, c.used); got != c.want {
			t.Errorf("heldBell(5, %v) = %d, want %d", c.used, got, c.want)
		}
	}
}
