package dblockotel_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"slices"
	"strings"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	dblockotel "github.com/dblockhq/dblock/otel"
	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Wire dblock's metrics to Prometheus: an OpenTelemetry meter provider
// with the Prometheus exporter, registered on a registry that
// promhttp.HandlerFor(registry, promhttp.HandlerOpts{}) would serve.
func Example_prometheus() {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())

	obs, err := dblockotel.New(dblockotel.WithMeterProvider(provider))
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("pgx", dbtest.DSN(dblock.Postgres)) // your database
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := dblock.Migrate(context.Background(), db, dblock.WithTable("example_otel_locks")); err != nil {
		log.Fatal(err)
	}
	locker, err := dblock.New(db, dblock.WithTable("example_otel_locks"), dblock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	obs.Watch(locker)

	err = locker.Do(context.Background(), "example:nightly", func(context.Context) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	families, err := registry.Gather()
	if err != nil {
		log.Fatal(err)
	}
	var names []string
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "dblock_") {
			names = append(names, f.GetName())
		}
	}
	slices.Sort(names)
	fmt.Println(strings.Join(names, "\n"))
	// Output:
	// dblock_lock_acquire_attempts
	// dblock_lock_acquire_duration_seconds
	// dblock_lock_held
	// dblock_lock_hold_duration_seconds
	// dblock_lock_waiting
}
