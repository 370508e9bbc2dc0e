// A Go program whose heap buffers go to the kernel through Go's own
// system calls (no libc): crates/numalab-cli/tests/host/real_runtimes.rs
// builds it with cgo ("CGO" becomes a call into C) and statically;
// bench/real-runtimes.sh builds the cgo form.
package main

import (
	"fmt"
	"os"
)

func main() {
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile("blob", data, 0o644); err != nil {
		fmt.Println("write error:", err)
		os.Exit(3)
	}
	sum := 0
	for round := 0; round < 6; round++ {
		b, err := os.ReadFile("blob")
		if err != nil {
			fmt.Println("readfile error:", err)
			os.Exit(3)
		}
		for _, x := range b {
			sum += int(x)
		}
	}
	fmt.Println("sum", sum, "CGO")
}
