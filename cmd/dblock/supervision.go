package main

// supervision is how run (and elect) confine CMD (startSupervised).
type supervision struct {
	// pidNamespace: on Linux, CMD runs in a PID namespace of its own,
	// whose every process the kernel kills when its supervisor dies
	// (--no-pid-namespace turns it off). Elsewhere it is ignored.
	pidNamespace bool
	// refused is called once when the kernel refused the namespace and CMD
	// runs in a process group of its own instead.
	refused func(err error)
	// stuck is called once when processes of CMD's group still run a
	// second after SIGKILL.
	stuck func()
}
