package main

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// cpuSample is the CPU time used so far by this process and by the whole
// machine, to tell how much other processes competed with a phase.
type cpuSample struct {
	process time.Duration
	machine time.Duration // busy time of all CPUs; -1 where unknown
}

func sampleCPU() cpuSample {
	return cpuSample{process: processCPU(), machine: machineBusy()}
}

// cpuUse is what a phase used: this process's CPU time, and the CPU time
// other processes took meanwhile (-1 where unknown).
func (s cpuSample) since(start cpuSample) (process, others time.Duration) {
	process = s.process - start.process
	others = -1
	if s.machine >= 0 && start.machine >= 0 {
		others = max(s.machine-start.machine-process, 0)
	}
	return process, others
}

// machineBusy reads the busy time of all CPUs from /proc/stat (user, nice,
// system, irq, softirq and steal: a hypervisor's steal is competition too),
// or -1 where there is none.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return -1
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system - - irq softirq steal
		n, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return -1
		}
		ticks += n
	}
	const userHZ = 100 // USER_HZ, 100 on every Linux ABI in use
	return time.Duration(ticks) * (time.Second / userHZ)
}
