package catalog

// BenchProduct is the id and name of the i-th product of the search
// benchmarks (benchProduct).
var BenchProduct = benchProduct

// CPUTime is the process's user and system time (cpuTime).
var CPUTime = cpuTime
