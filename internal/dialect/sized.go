package dialect

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// MaxBatch bounds the calls one combined statement carries.
const MaxBatch = 32

// batchSizes are the sizes of combined statements: a batch is padded to the
// next size, so a few texts (and prepared statements) serve every batch.
var batchSizes = [...]int{2, 3, 4, 6, 8, 12, 16, 24, MaxBatch}

// Padded returns cs followed by nil calls up to the next batch size; a nil
// call's placeholders are bound to NULL, which matches no row.
func Padded(cs []*Call) []*Call {
	size := MaxBatch
	for _, s := range batchSizes {
		if s >= len(cs) {
			size = s
			break
		}
	}
	return append(cs[:len(cs):len(cs)], make([]*Call, size-len(cs))...)
}

// AppendArgs appends vals(c) for each call of cs, and as many NULLs for a
// nil call (Padded).
func AppendArgs(args []any, cs []*Call, vals func(*Call) []any) []any {
	n := 0
	for _, c := range cs {
		if c == nil {
			args = append(args, make([]any, n)...)
			continue
		}
		v := vals(c)
		n = len(v)
		args = append(args, v...)
	}
	return args
}

// RefArgs are a release's arguments: key, owner, token.
func RefArgs(c *Call) []any { return []any{c.Key, c.Owner, c.Token} }

// SortByKey sorts cs by key, so that two statements lock shared rows in
// one order.
func SortByKey(cs []*Call) {
	slices.SortFunc(cs, func(a, b *Call) int { return strings.Compare(a.Key, b.Key) })
}

// Sized is a statement with one text per number of calls (1 to MaxBatch),
// each built on first use and kept: one prepared statement per size.
type Sized struct {
	build func(n int) string

	mu    sync.Mutex
	texts [MaxBatch + 1]string
	wide  map[int]string // texts for more than MaxBatch (ListWidth)
}

// MaxList bounds the numbers of one list statement (ListWidth): the
// waiter records a Locker renews or deletes at once.
const MaxList = 512

// ListWidth is the size of the statement that carries n numbers of a list
// (1 <= n <= MaxList): n itself up to MaxBatch, else the next power of two,
// so that few texts serve every list; the rest is padded with NULLs, which
// match no row.
func ListWidth(n int) int {
	if n <= MaxBatch {
		return n
	}
	w := MaxBatch
	for w < n {
		w *= 2
	}
	return w
}

// NewSized returns a Sized whose text for n calls is build(n).
func NewSized(build func(n int) string) *Sized { return &Sized{build: build} }

// ValuesSQL is a Sized whose {rows} in tmpl is a VALUES list of n rows, each
// a numbered placeholder per cast (its type), from first.
func ValuesSQL(tmpl string, first int, casts ...string) *Sized {
	return NewSized(func(n int) string {
		var b strings.Builder
		arg := first
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j, c := range casts {
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "$%d::%s", arg, c)
				arg++
			}
			b.WriteByte(')')
		}
		return strings.Replace(tmpl, "{rows}", b.String(), 1)
	})
}

// ListSQL is a Sized whose {list} in text is n placeholders, the i-th (from
// 1) made by bind.
func ListSQL(text string, bind func(i int) string) *Sized {
	return NewSized(func(n int) string {
		ph := make([]string, n)
		for i := range ph {
			ph[i] = bind(i + 1)
		}
		return strings.Replace(text, "{list}", strings.Join(ph, ", "), 1)
	})
}

// Text returns the statement for n calls, 1 <= n <= MaxBatch, or a width
// of ListWidth.
func (s *Sized) Text(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > MaxBatch {
		t, ok := s.wide[n]
		if !ok {
			if s.wide == nil {
				s.wide = make(map[int]string)
			}
			t = s.build(n)
			s.wide[n] = t
		}
		return t
	}
	if s.texts[n] == "" {
		s.texts[n] = s.build(n)
	}
	return s.texts[n]
}

// Placeholders returns n copies of mark joined by commas.
func Placeholders(mark string, n int) string {
	return strings.TrimSuffix(strings.Repeat(mark+", ", n), ", ")
}
