package postgres

import (
	"strconv"
	"strings"
)

// Arrays go to the server as PostgreSQL array literals ('{"a","b"}',
// '{1,2}'): a string is an argument every driver passes — pgx, lib/pq, and
// database/sql wrappers that hide pgx's argument checker — where a []string
// needs pgx's own conversion (lib/pq refused it, and every renewal on lib/pq
// failed). The statements cast them ($1::text[], $2::bigint[]).

// textArray renders ss as a text[] literal: every element quoted, with
// backslashes before quotes and backslashes (keys hold no NUL).
func textArray(ss []string) string {
	n := 2
	for _, s := range ss {
		n += len(s) + 3
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for j := 0; j < len(s); j++ {
			if c := s[j]; c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// bigintArray renders ns as a bigint[] literal.
func bigintArray(ns []int64) string {
	b := make([]byte, 0, 2+len(ns)*8)
	b = append(b, '{')
	for i, n := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return string(append(b, '}'))
}
