/* The operations bench/op_cost measures, shared by op_cost.bpf.c and
 * op_cost.c. */
#ifndef DWLEAK_OP_COST_H
#define DWLEAK_OP_COST_H

enum op_kind {
	OP_EMPTY = 0,
	OP_PID_TGID,
	OP_TASK_BTF,
	OP_ATTACH_COOKIE,
	OP_KTIME,
	OP_PERCPU_LOOKUP,
	OP_TASK_STORAGE,
	OP_RING_RECORD,
	OP_RING_QUERY,
	OP_HASH_UPDATE_DELETE,
	OP_READ_8_STACK,
	OP_READ_64,
	OP_READ_256,
	OP_READ_1024,
	OP_READ_4096,
	OP_COUNT
};

#endif
