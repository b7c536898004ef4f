// Package dblockotel turns a dblock.Locker's events into OpenTelemetry
// metrics and spans. It is a module of its own
// (github.com/dblockhq/dblock/otel), so that dblock's users who do not use
// OpenTelemetry do not get it in their module graph.
//
//	obs, err := dblockotel.New() // the global meter and tracer providers
//	locker, err := dblock.New(db, dblock.WithObserver(obs))
//	err = obs.Watch(locker) // the held and waiting gauges
//
// Metrics (docs/metrics.md lists them with Prometheus names and queries):
//
//	dblock.lock.held             gauge      {lock}     locks held
//	dblock.lock.waiting          gauge      {call}     calls waiting for a key
//	dblock.lock.acquire.duration histogram  s          time to acquire, or to give up; dblock.acquire.result, dblock.acquire.mode
//	dblock.lock.acquire.attempts histogram  {attempt}  statements per acquisition of a row lock
//	dblock.lock.hold.duration    histogram  s          time held, at release; dblock.release.cause
//	dblock.lock.lost             counter    {lock}     locks lost; dblock.lost.cause
//	dblock.renewal.duration      histogram  s          one renewal statement; error.type when it failed
//	dblock.renewal.locks         histogram  {lock}     leases per renewal statement
//
// Spans: dblock.acquire (from the call to the lock, or the error),
// dblock.release, and dblock.do around the callback of Locker.Do, whose
// context carries it, so the callback's own spans nest under it.
//
// Key names are not recorded by default, in metrics or spans: they can
// hold customer data (an invoice number, a tenant). WithKeys records them,
// as the attribute dblock.key; mind the cardinality of metrics keyed by
// them.
package dblockotel

import (
	"context"
	"errors"
	"sync"

	"github.com/dblockhq/dblock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/dblockhq/dblock/otel"

// Attribute keys.
const (
	KeyAttr      = attribute.Key("dblock.key")            // the lock's key (WithKeys only)
	TokenAttr    = attribute.Key("dblock.token")          // the fencing token (spans only)
	ResultAttr   = attribute.Key("dblock.acquire.result") // acquired, locked, canceled, error
	ModeAttr     = attribute.Key("dblock.acquire.mode")   // wait, try
	CauseAttr    = attribute.Key("dblock.release.cause")  // released, max_hold, closed
	LostAttr     = attribute.Key("dblock.lost.cause")     // expired, taken_over
	AttemptsAttr = attribute.Key("dblock.acquire.attempts")
	ErrorAttr    = attribute.Key("error.type")
)

// Observer is a dblock.Observer that records metrics and spans; make it
// with New and pass it to dblock.WithObserver. One Observer may serve
// several Lockers.
type Observer struct {
	dblock.NopObserver
	tracer trace.Tracer
	keys   bool
	attrs  []attribute.KeyValue

	acquire, hold, renewal metric.Float64Histogram
	attempts, renewalLocks metric.Int64Histogram
	lost                   metric.Int64Counter
	held, waiting          metric.Int64ObservableGauge
	mu                     sync.Mutex
	lockers                map[*dblock.Locker]struct{}
	registration           metric.Registration
	base                   attribute.Set // o.attrs, built once
}

// Option configures an Observer.
type Option func(*Observer, *settings)

type settings struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets the meter provider (default: otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(_ *Observer, s *settings) { s.mp = mp }
}

// WithTracerProvider sets the tracer provider (default: otel.GetTracerProvider()).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(_ *Observer, s *settings) { s.tp = tp }
}

// WithKeys records key names, as dblock.key, on metrics and spans.
func WithKeys() Option {
	return func(o *Observer, _ *settings) { o.keys = true }
}

// WithAttributes adds attrs to every metric and span (a service's role,
// the database's name).
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(o *Observer, _ *settings) { o.attrs = append(o.attrs, attrs...) }
}

// New returns an Observer on the providers given by the options, or the
// global ones.
func New(opts ...Option) (*Observer, error) {
	o := &Observer{lockers: map[*dblock.Locker]struct{}{}}
	s := settings{}
	for _, opt := range opts {
		opt(o, &s)
	}
	if s.mp == nil {
		s.mp = otel.GetMeterProvider()
	}
	if s.tp == nil {
		s.tp = otel.GetTracerProvider()
	}
	o.tracer = s.tp.Tracer(ScopeName)
	if err := o.instruments(s.mp.Meter(ScopeName)); err != nil {
		return nil, err
	}
	o.base = attribute.NewSet(o.attrs...)
	return o, nil
}

// seconds are the histogram buckets of durations: 100 µs to 60 s.
var seconds = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func (o *Observer) instruments(m metric.Meter) error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	o.acquire, err = m.Float64Histogram("dblock.lock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from an acquire call to the lock, or to giving up."), metric.WithExplicitBucketBoundaries(seconds...))
	add(err)
	o.hold, err = m.Float64Histogram("dblock.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a lock was held, measured at its release."), metric.WithExplicitBucketBoundaries(seconds...))
	add(err)
	o.renewal, err = m.Float64Histogram("dblock.renewal.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of one renewal statement of the heartbeat."), metric.WithExplicitBucketBoundaries(seconds...))
	add(err)
	o.attempts, err = m.Int64Histogram("dblock.lock.acquire.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Statements that tried to take the key, per acquisition of a row lock."),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 3, 5, 10, 20, 50, 100))
	add(err)
	o.renewalLocks, err = m.Int64Histogram("dblock.renewal.locks", metric.WithUnit("{lock}"),
		metric.WithDescription("Leases renewed by one renewal statement."),
		metric.WithExplicitBucketBoundaries(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000))
	add(err)
	o.lost, err = m.Int64Counter("dblock.lock.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks that ended without their holder releasing them."))
	add(err)
	o.held, err = m.Int64ObservableGauge("dblock.lock.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held by the watched Lockers."))
	add(err)
	o.waiting, err = m.Int64ObservableGauge("dblock.lock.waiting", metric.WithUnit("{call}"),
		metric.WithDescription("Calls of the watched Lockers waiting for a key."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	o.registration, err = m.RegisterCallback(o.observe, o.held, o.waiting)
	return err
}

// Watch adds l's held and waiting counts (Locker.Stats) to the gauges, summed
// over every watched Locker, until Unwatch (a closed Locker counts 0; call
// Unwatch to drop it).
func (o *Observer) Watch(l *dblock.Locker) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lockers[l] = struct{}{}
}

// Unwatch takes l out of the gauges.
func (o *Observer) Unwatch(l *dblock.Locker) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.lockers, l)
}

// Shutdown unregisters the gauges' callback.
func (o *Observer) Shutdown() error { return o.registration.Unregister() }

func (o *Observer) observe(_ context.Context, obs metric.Observer) error {
	o.mu.Lock()
	var held, waiting int64
	for l := range o.lockers {
		st := l.Stats()
		held += int64(st.Held)
		waiting += int64(st.Waiting)
	}
	o.mu.Unlock()
	set := metric.WithAttributeSet(o.base)
	obs.ObserveInt64(o.held, held, set)
	obs.ObserveInt64(o.waiting, waiting, set)
	return nil
}

// Start implements dblock.Observer: it starts the operation's span.
func (o *Observer) Start(ctx context.Context, op dblock.Op, key string) context.Context {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(o.attrs...)}
	if o.keys {
		opts = append(opts, trace.WithAttributes(KeyAttr.String(key)))
	}
	ctx, _ = o.tracer.Start(ctx, "dblock."+op.String(), opts...)
	return ctx
}

// End implements dblock.Observer: it records the operation's metrics and
// ends its span.
func (o *Observer) End(ctx context.Context, op dblock.Op, e dblock.Event) {
	span := trace.SpanFromContext(ctx)
	attrs := o.common(e.Key)
	switch op {
	case dblock.OpAcquire:
		mode := "try"
		if e.Wait {
			mode = "wait"
		}
		result := acquireResult(e.Err)
		attrs = append(attrs, ResultAttr.String(result), ModeAttr.String(mode))
		o.acquire.Record(ctx, e.Elapsed.Seconds(), metric.WithAttributes(attrs...))
		if e.Attempts > 0 {
			o.attempts.Record(ctx, int64(e.Attempts), metric.WithAttributes(attrs...))
		}
		span.SetAttributes(ResultAttr.String(result), ModeAttr.String(mode), AttemptsAttr.Int(e.Attempts))
		if result == "error" {
			recordError(span, e.Err)
		}
	case dblock.OpRelease:
		attrs = append(attrs, CauseAttr.String(releaseCause(e.Cause)))
		o.hold.Record(ctx, e.Held.Seconds(), metric.WithAttributes(attrs...))
		span.SetAttributes(CauseAttr.String(releaseCause(e.Cause)))
		if e.Err != nil {
			recordError(span, e.Err)
		}
	case dblock.OpDo:
		if e.Err != nil {
			recordError(span, e.Err)
		}
	}
	if e.Token != 0 {
		span.SetAttributes(TokenAttr.Int64(e.Token))
	}
	span.End()
}

// Renewed implements dblock.Observer.
func (o *Observer) Renewed(r dblock.Renewal) {
	ctx := context.Background()
	attrs := o.attrs
	if r.Err != nil {
		attrs = append(append([]attribute.KeyValue(nil), o.attrs...), ErrorAttr.String(errorType(r.Err)))
	}
	o.renewal.Record(ctx, r.Elapsed.Seconds(), metric.WithAttributes(attrs...))
	o.renewalLocks.Record(ctx, int64(r.Locks), metric.WithAttributes(o.attrs...))
}

// Lost implements dblock.Observer.
func (o *Observer) Lost(key string, _ int64, cause error) {
	c := "taken_over"
	if errors.Is(cause, dblock.ErrLeaseExpired) {
		c = "expired"
	}
	o.lost.Add(context.Background(), 1, metric.WithAttributes(append(o.common(key), LostAttr.String(c))...))
}

// common returns the attributes of every measurement of key.
func (o *Observer) common(key string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, len(o.attrs)+3)
	attrs = append(attrs, o.attrs...)
	if o.keys {
		attrs = append(attrs, KeyAttr.String(key))
	}
	return attrs
}

func acquireResult(err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, dblock.ErrLocked):
		return "locked"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}

func releaseCause(err error) string {
	switch {
	case errors.Is(err, dblock.ErrMaxHold):
		return "max_hold"
	case errors.Is(err, dblock.ErrClosed):
		return "closed"
	}
	return "released"
}

// errorType names an error for error.type: the dblock sentinel it wraps,
// else "_OTHER", as the semantic conventions ask for.
func errorType(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{context.DeadlineExceeded, "timeout"},
		{context.Canceled, "canceled"},
		{dblock.ErrClosed, "closed"},
		{dblock.ErrNoSchema, "no_schema"},
		{dblock.ErrDeadlock, "deadlock"},
		{dblock.ErrLockTimeout, "lock_timeout"},
		{dblock.ErrNotHeld, "not_held"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "_OTHER"
}

func recordError(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(ErrorAttr.String(errorType(err)))
}
