package framework

import (
	"os"
	"testing"
	"time"
)

// TestMachineCPU checks that the machine's busy time grows by at least what
// this process itself spends on a core, whatever else the machine does.
func TestMachineCPU(t *testing.T) {
	busy0, idle0, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	self0, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var self time.Duration
	for spin := 0; self-self0 < 300*time.Millisecond; spin++ {
		if spin%1_000_000 == 0 {
			if self, err = ProcessCPU(os.Getpid()); err != nil {
				t.Fatal(err)
			}
		}
	}
	busy1, idle1, err := MachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	// Both figures count ticks of 10 ms, each rounded down.
	if got, want := busy1-busy0, self-self0-20*time.Millisecond; got < want {
		t.Errorf("the machine's busy time grew by %v while this process used %v of CPU", got, self-self0)
	}
	if idle1 < idle0 {
		t.Errorf("the machine's idle time went back, from %v to %v", idle0, idle1)
	}
}
