package dialect

// Direct reports whether c's one-row queries call the pool's driver
// directly: "unknown" until the first one, then "on" or "off".
func Direct(c *StmtCache) string {
	return [...]string{directUnknown: "unknown", directOn: "on", directOff: "off"}[c.direct.Load()]
}
