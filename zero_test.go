package dblock_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/dblockhq/dblock"
)

// Every exported method of a nil or zero Lock, Locker and TxLock returns
// (an error, where it returns one) without panicking.
func TestZeroValuesDoNotPanic(t *testing.T) {
	values := map[string]any{
		"nil *Lock":   (*dblock.Lock)(nil),
		"zero Lock":   &dblock.Lock{},
		"nil *Locker": (*dblock.Locker)(nil),
		"zero Locker": &dblock.Locker{},
		"nil *TxLock": (*dblock.TxLock)(nil),
		"zero TxLock": &dblock.TxLock{},
	}
	for name, v := range values {
		rv := reflect.ValueOf(v)
		for i := range rv.NumMethod() {
			m := rv.Type().Method(i)
			t.Run(name+"."+m.Name, func(t *testing.T) {
				out, panicked := call(rv.Method(i))
				if panicked != nil {
					t.Fatalf("panic: %v", panicked)
				}
				for _, o := range out {
					if o.Type() == reflect.TypeFor[error]() && o.IsNil() && returnsErrorOnly(m.Name) {
						t.Errorf("returned a nil error")
					}
				}
			})
		}
	}
}

// returnsErrorOnly lists methods whose nil error would be a lie on a nil or
// zero receiver: they act on a lock or on the database.
func returnsErrorOnly(name string) bool {
	switch name {
	case "Unlock", "Lock", "TryLock", "Do", "LockTx", "TryLockTx", "Check", "Extend",
		"Migrate", "List", "ForceUnlock", "Reap", "Singleton":
		return true
	}
	return false
}

// call calls m with zero arguments (a live context, a key, nil otherwise)
// and returns its results, or what it panicked with.
func call(m reflect.Value) (out []reflect.Value, panicked any) {
	defer func() { panicked = recover() }()
	mt := m.Type()
	var args []reflect.Value
	for j := range mt.NumIn() {
		in := mt.In(j)
		switch {
		case mt.IsVariadic() && j == mt.NumIn()-1:
		case in == reflect.TypeFor[context.Context]():
			args = append(args, reflect.ValueOf(context.Background()))
		case in.Kind() == reflect.String:
			args = append(args, reflect.ValueOf("k").Convert(in))
		default:
			args = append(args, reflect.Zero(in))
		}
	}
	if mt.IsVariadic() {
		return m.Call(args), nil
	}
	return m.Call(args), nil
}
