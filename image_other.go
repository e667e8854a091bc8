//go:build !linux

package main

import "time"

const releaseAfter = time.Second

// releaseExecutablePages does nothing outside Linux.
func releaseExecutablePages() error { return nil }
