package dblockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dblockhq/dblock"
	"github.com/dblockhq/dblock/internal/dbtest"
	dblockotel "github.com/dblockhq/dblock/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

type harness struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	obs    *dblockotel.Observer
}

func newHarness(t *testing.T, opts ...dblockotel.Option) harness {
	t.Helper()
	h := harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	obs, err := dblockotel.New(append([]dblockotel.Option{dblockotel.WithMeterProvider(mp), dblockotel.WithTracerProvider(tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	return h
}

// lostSignal passes every event to the Observer under test and says on
// lost when its Lost has returned: Lost follows Done, so a test that reads
// the loss's metric waits for it.
type lostSignal struct {
	dblock.Observer
	lost chan struct{}
}

func (o *lostSignal) Lost(key string, token int64, cause error) {
	o.Observer.Lost(key, token, cause)
	select {
	case o.lost <- struct{}{}:
	default:
	}
}

// metrics collects and returns the data points by metric name.
func (h harness) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != dblockotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// count sums the histogram's counts over the points whose attributes
// include want.
func count(t *testing.T, agg metricdata.Aggregation, want ...attribute.KeyValue) uint64 {
	t.Helper()
	var n uint64
	switch h := agg.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range h.DataPoints {
			if has(p.Attributes, want) {
				n += p.Count
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range h.DataPoints {
			if has(p.Attributes, want) {
				n += p.Count
			}
		}
	case metricdata.Sum[int64]:
		for _, p := range h.DataPoints {
			if has(p.Attributes, want) {
				n += uint64(p.Value)
			}
		}
	default:
		t.Fatalf("aggregation %T", agg)
	}
	return n
}

func gauge(t *testing.T, agg metricdata.Aggregation) int64 {
	t.Helper()
	g, ok := agg.(metricdata.Gauge[int64])
	if !ok || len(g.DataPoints) != 1 {
		t.Fatalf("gauge = %#v", agg)
	}
	return g.DataPoints[0].Value
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Every metric, read back: acquisitions by result and mode, attempts,
// holds by cause, a loss by cause, renewals, and the held and waiting
// gauges; no key is recorded.
func TestMetrics(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d dblock.Dialect) {
		ctx := ctxT(t)
		h := newHarness(t, dblockotel.WithAttributes(attribute.String("service.role", "test")))
		obs := &lostSignal{Observer: h.obs, lost: make(chan struct{}, 1)}
		l, _, table := dbtest.Locker(t, d, dblock.WithObserver(obs), dblock.WithTTL(time.Second))
		h.obs.Watch(l)
		other, err := dblock.New(dbtest.Open(t, d), dblock.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()

		a, err := l.TryLock(ctx, "invoice/7")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.TryLock(ctx, "invoice/7"); !errors.Is(err, dblock.ErrLocked) {
			t.Fatal(err)
		}
		victim, err := l.Lock(ctx, "victim")
		if err != nil {
			t.Fatal(err)
		}
		// The heartbeat renews the two leases.
		for h.metrics(t)["dblock.renewal.duration"] == nil {
			select {
			case <-ctx.Done():
				t.Fatal("no renewal recorded")
			case <-time.After(10 * time.Millisecond):
			}
		}
		m := h.metrics(t)
		if got := gauge(t, m["dblock.lock.held"]); got != 2 {
			t.Errorf("held gauge = %d, want 2", got)
		}
		// A waiter shows in the waiting gauge.
		done := make(chan error, 1)
		go func() {
			w, err := l.Lock(ctx, "invoice/7")
			if err == nil {
				err = w.Unlock(ctx)
			}
			done <- err
		}()
		for l.Stats().Waiting != 1 {
			select {
			case <-ctx.Done():
				t.Fatal("the waiter never showed")
			case <-time.After(time.Millisecond):
			}
		}
		if got := gauge(t, h.metrics(t)["dblock.lock.waiting"]); got != 1 {
			t.Errorf("waiting gauge = %d, want 1", got)
		}
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := other.ForceUnlock(ctx, "victim"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-victim.Done(): // the heartbeat found it taken
		case <-ctx.Done():
			t.Fatal("the victim never saw its loss")
		}
		select {
		case <-obs.lost: // Lost is called right after Done closes
		case <-ctx.Done():
			t.Fatal("the Observer never heard of the loss")
		}

		m = h.metrics(t)
		role := attribute.String("service.role", "test")
		for _, c := range []struct {
			metric string
			attrs  []attribute.KeyValue
			want   uint64
		}{
			{"dblock.lock.acquire.duration", []attribute.KeyValue{role, dblockotel.ResultAttr.String("acquired"), dblockotel.ModeAttr.String("try")}, 1},
			{"dblock.lock.acquire.duration", []attribute.KeyValue{dblockotel.ResultAttr.String("locked"), dblockotel.ModeAttr.String("try")}, 1},
			{"dblock.lock.acquire.duration", []attribute.KeyValue{dblockotel.ResultAttr.String("acquired"), dblockotel.ModeAttr.String("wait")}, 2},
			{"dblock.lock.hold.duration", []attribute.KeyValue{role, dblockotel.CauseAttr.String("released")}, 2},
			{"dblock.lock.lost", []attribute.KeyValue{role, dblockotel.LostAttr.String("taken_over")}, 1},
		} {
			if got := count(t, m[c.metric], c.attrs...); got != c.want {
				t.Errorf("%s %v: %d, want %d", c.metric, c.attrs, got, c.want)
			}
		}
		if got := count(t, m["dblock.lock.acquire.attempts"]); got < 3 {
			t.Errorf("attempts recorded %d times, want at least 3", got)
		}
		if count(t, m["dblock.renewal.duration"], role) == 0 || count(t, m["dblock.renewal.locks"]) == 0 {
			t.Error("no renewal recorded")
		}
		if got := gauge(t, m["dblock.lock.held"]); got != 0 {
			t.Errorf("held gauge at the end = %d, want 0", got)
		}
		for _, s := range h.spans.Ended() {
			for _, kv := range s.Attributes() {
				if kv.Key == dblockotel.KeyAttr {
					t.Errorf("span %s recorded the key without WithKeys", s.Name())
				}
			}
		}
		h.obs.Unwatch(l)
	})
}

// Spans: acquire, release and do, with the token; a failed callback marks
// its span; the callback's own spans are children of dblock.do; WithKeys
// records the key.
func TestSpans(t *testing.T) {
	ctx := ctxT(t)
	h := newHarness(t, dblockotel.WithKeys())
	l, _, _ := dbtest.Locker(t, dblock.Postgres, dblock.WithObserver(h.obs))
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans)).Tracer("app")
	var token int64
	err := l.Do(ctx, "report", func(ctx context.Context) error {
		_, inner := tracer.Start(ctx, "render")
		inner.End()
		return errors.New("render failed")
	})
	if err == nil {
		t.Fatal("Do returned no error")
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range h.spans.Ended() {
		byName[s.Name()] = s
	}
	for _, name := range []string{"dblock.acquire", "dblock.release", "dblock.do", "render"} {
		if byName[name] == nil {
			t.Fatalf("no span %s among %v", name, byName)
		}
	}
	attr := func(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
		for _, kv := range s.Attributes() {
			if kv.Key == k {
				return kv.Value
			}
		}
		return attribute.Value{}
	}
	acq := byName["dblock.acquire"]
	token = attr(acq, dblockotel.TokenAttr).AsInt64()
	if token <= 0 || attr(acq, dblockotel.KeyAttr).AsString() != "report" || attr(acq, dblockotel.ResultAttr).AsString() != "acquired" {
		t.Errorf("acquire span attributes %v", acq.Attributes())
	}
	if do := byName["dblock.do"]; do.Status().Code != codes.Error || attr(do, dblockotel.TokenAttr).AsInt64() != token {
		t.Errorf("do span: status %v, attributes %v; want an error and token %d", do.Status(), do.Attributes(), token)
	}
	if byName["render"].Parent().SpanID() != byName["dblock.do"].SpanContext().SpanID() {
		t.Error("the callback's span is not a child of dblock.do")
	}
	if rel := byName["dblock.release"]; attr(rel, dblockotel.CauseAttr).AsString() != "released" || rel.Status().Code == codes.Error {
		t.Errorf("release span: %v %v", rel.Status(), rel.Attributes())
	}
}
