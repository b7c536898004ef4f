package dblock

import (
	"fmt"
	"strings"
	"sync"
)

// sizedSQL is a combined statement in one text per number of calls (n from
// padded): each text is built on first use and kept, so that a combined
// statement costs no string building and each size is one prepared
// statement.
type sizedSQL struct {
	build func(n int) string

	mu    sync.Mutex
	texts [maxBatch + 1]string
}

func newSizedSQL(build func(n int) string) *sizedSQL { return &sizedSQL{build: build} }

// valuesSQL is a sizedSQL whose {rows} in tmpl is a VALUES list of n rows,
// each a placeholder per cast (its type), numbered from first.
func valuesSQL(tmpl string, first int, casts ...string) *sizedSQL {
	return newSizedSQL(func(n int) string {
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

// text returns the statement for n calls, 1 <= n <= maxBatch.
func (s *sizedSQL) text(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.texts[n] == "" {
		s.texts[n] = s.build(n)
	}
	return s.texts[n]
}
