// A Go program that leaks from C code it calls through cgo: 20 blocks of
// 100 to 102 bytes (2019 B in all) allocated by c_leak, called by c_outer,
// called from the goroutine in goLeaker.  dwleak must stop the C stack
// where Go switches stacks (runtime.asmcgocall), not walk on with wrong
// frames.
package main

/*
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void *c_leak(int n) { void *p = malloc(n); memset(p, 1, n); return p; }
__attribute__((noinline)) void c_outer(int i) { c_leak(100 + i % 3); }
*/
import "C"
import (
	"fmt"
	"time"
)

func goLeaker(i int) { C.c_outer(C.int(i)) }

func main() {
	for i := 0; i < 20; i++ {
		goLeaker(i)
		time.Sleep(time.Millisecond)
	}
	fmt.Println("done")
}
