//go:build !unix

package faultsuite

import (
	"errors"
	"os"
)

// stopProcess and contProcess are unsupported here: pause faults become
// cuts.
func stopProcess(*os.Process) error { return errors.ErrUnsupported }
func contProcess(*os.Process) error { return errors.ErrUnsupported }
