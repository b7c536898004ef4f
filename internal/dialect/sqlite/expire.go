package sqlite

// ExpireSQL returns the statement that ends the lease of key's live row in
// table now, as if its holder had stopped renewing it a lease ago (the
// test helper dblocktest.Expire): ?1 is the key. The holder's next
// renewal finds the row no longer its own. table must be validated.
func ExpireSQL(table string) string {
	return `UPDATE "` + table + `" SET update_time = ` + liteNow + ` - lease_ms * 1000 - 1000
WHERE key_id = ?1 AND depth > 0 AND NOT (` + liteExpired + `)`
}
