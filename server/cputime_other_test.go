//go:build !linux

package server

import "time"

// threadCPU is only read on Linux.
func threadCPU() (time.Duration, bool) { return 0, false }

// processCPU is only read on Linux.
func processCPU() (time.Duration, bool) { return 0, false }
