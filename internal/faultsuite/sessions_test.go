package faultsuite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"strconv"
)

// recordingConnector reports the server's id of every session it opens, so
// the parent can terminate a worker's sessions. The connection it returns
// is the driver's own, so dblock sees (and unwraps) the driver it knows.
type recordingConnector struct {
	driver.Connector
	query string
	seen  func(id int64)
}

func (c recordingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	id, err := sessionID(ctx, conn, c.query)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.seen(id)
	return conn, nil
}

// openRecording opens a pool on dsn whose new sessions are reported to seen.
func openRecording(driverName, dsn, idQuery string, seen func(int64)) (*sql.DB, error) {
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	drv := probe.Driver()
	probe.Close()
	dc, ok := drv.(driver.DriverContext)
	if !ok {
		return nil, fmt.Errorf("driver %T has no connectors", drv)
	}
	c, err := dc.OpenConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(recordingConnector{Connector: c, query: idQuery, seen: seen}), nil
}

func sessionID(ctx context.Context, conn driver.Conn, query string) (int64, error) {
	qc, ok := conn.(driver.QueryerContext)
	if !ok {
		return 0, fmt.Errorf("connection %T cannot query", conn)
	}
	rows, err := qc.QueryContext(ctx, query, nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		if err == io.EOF {
			return 0, fmt.Errorf("%s: no row", query)
		}
		return 0, err
	}
	switch x := v[0].(type) {
	case int64:
		return x, nil
	case uint64:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case []byte:
		return strconv.ParseInt(string(x), 10, 64)
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("%s: unexpected %T", query, v[0])
}
