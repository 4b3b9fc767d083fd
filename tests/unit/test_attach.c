/* bpf/attach.c's run-time probes on the running kernel, for real: uprobe
 * multi links exist from Linux 6.6, run their program in every thread of
 * the process they were made for from 6.10, and sessions exist from 6.13.
 * On such a kernel each probe must say yes; a probe that wrongly said no
 * would send dwleak to its slower fallbacks, one that wrongly said yes
 * would lose other threads' allocations (tests/ledger.sh checks those
 * per site).  Needs root and BPF (skips without, fails with CI=true). */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attach.h"
#include "check.h"

int main(void)
{
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "test_attach", 4, 8, 1, NULL);

	if (fd < 0) {
		printf("skip: cannot create a BPF map (%s): needs root and BPF\n", strerror(errno));
		return EXIT_SKIP;
	}
	close(fd);
	if (!kernel_at_least(6, 10)) {
		printf("skip: this kernel predates 6.10, where the probes may rightly say no\n");
		return EXIT_SKIP;
	}
	EXPECT(attach_multi_per_process(), "a multi link made for this pid did not run in a second thread");
	EXPECT(attach_multi_supported());
	if (kernel_at_least(6, 13))
		EXPECT(attach_session_supported());
	/* the probe target is a real function, callable: the probe found its symbol */
	attach_probe_target();
	if (!check_failures)
		printf("test_attach: ok\n");
	return check_status();
}
