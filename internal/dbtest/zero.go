package dbtest

import (
	"context"
	"reflect"
	"testing"
)

// CheckZeroValues calls, as a subtest each, every exported method of each of
// values (nil or zero receivers, by name) with zero arguments (a live
// context, a key, nil otherwise): none may panic, and the methods that act
// on a lock or on the database must return a non-nil error.
func CheckZeroValues(t *testing.T, values map[string]any) {
	for name, v := range values {
		rv := reflect.ValueOf(v)
		for i := range rv.NumMethod() {
			m := rv.Type().Method(i)
			t.Run(name+"."+m.Name, func(t *testing.T) {
				out, panicked := callWithZeros(rv.Method(i))
				if panicked != nil {
					t.Fatalf("panic: %v", panicked)
				}
				for _, o := range out {
					if o.Type() == reflect.TypeFor[error]() && o.IsNil() && actsOnLock(m.Name) {
						t.Errorf("returned a nil error")
					}
				}
			})
		}
	}
}

// actsOnLock lists methods whose nil error would be a lie on a nil or zero
// receiver: they act on a lock or on the database.
func actsOnLock(name string) bool {
	switch name {
	case "Unlock", "Lock", "TryLock", "Do", "LockTx", "TryLockTx", "Check", "Extend",
		"Migrate", "List", "ForceUnlock", "Reap", "Singleton", "Get", "LockAll", "TryLockAll",
		"Campaign", "Leader", "Proclaim", "Resign", "Acquire", "TryAcquire", "Release":
		return true
	}
	return false
}

// callWithZeros calls m with zero arguments and returns its results, or
// what it panicked with.
func callWithZeros(m reflect.Value) (out []reflect.Value, panicked any) {
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
	return m.Call(args), nil
}
