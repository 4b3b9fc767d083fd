/* libFuzzer target for what the injector reads of a process's seccomp
 * filters (PTRACE_SECCOMP_GET_FILTER: the target's data): the classic-BPF
 * evaluator (target/seccomp_eval.c) and the judgement over the
 * injection's calls (target/inject_safe.c).  The input: 64 bytes of
 * seccomp_data, then the program's instructions (8 bytes each).  Besides
 * not crashing: a run ends (forward jumps only), and a verdict is one of
 * the four fates. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inject_safe.h"
#include "seccomp_eval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seccomp_eval_data d;
	struct sock_filter *prog;
	const struct sock_filter *progs[2];
	size_t n, lens[2];
	uint32_t ret;
	char why[128];
	int err, r;

	if (size < sizeof(d))
		return 0;
	memcpy(&d, data, sizeof(d));
	n = (size - sizeof(d)) / sizeof(*prog);
	prog = malloc((n ? n : 1) * sizeof(*prog));
	if (!prog)
		abort();
	memcpy(prog, data + sizeof(d), n * sizeof(*prog));
	r = seccomp_eval(prog, n, &d, &ret);
	if (r && r != -EINVAL)
		abort();
	if (!r && seccomp_fate_of(ret, &err) > SECCOMP_KILLS)
		abort();
	progs[0] = prog;
	progs[1] = prog;
	lens[0] = lens[1] = n;
	r = inject_seccomp_judge(progs, lens, 2, d.ip, d.ip + 64, why, sizeof(why));
	if (r && r != -EPERM && r != -EINVAL)
		abort();
	if (r && !memchr(why, 0, sizeof(why)))
		abort();
	free(prog);
	return 0;
}
