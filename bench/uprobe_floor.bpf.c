// Empty uprobe programs for the "own floor" rows of bench/run_*_bench.sh:
// what the traps at dwleak's own probe sites cost with nothing to do.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("uprobe")
int floor_entry(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int floor_return(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
