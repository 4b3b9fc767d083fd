/* The probe sites of sites.S, as the library calls them: functions whose
 * first instruction is the NOP a tracer probes, and the semaphores that
 * count the tracers attached to each.  bpf/abi/preload.h is the contract
 * for their arguments. */
#ifndef DWLEAK_PRELOAD_SITES_H
#define DWLEAK_PRELOAD_SITES_H

#include <stdint.h>

/* dwleak:alloc: PTR (not NULL) now holds SIZE bytes from a call of KIND
 * (enum alloc_kind) served by REAL; CALLER_SP is the stack pointer at the
 * library's entry (x86_64: where the return address into the caller is),
 * CALLER_RA that return address. */
void dwleak_site_alloc(void *ptr, uint64_t size, uint64_t kind, void *real, uint64_t caller_sp, uint64_t caller_ra);

/* dwleak:free: PTR (not NULL) is about to be released; HOW is enum
 * dwleak_preload_free. */
void dwleak_site_free(void *ptr, uint64_t how);

extern volatile uint16_t dwleak_alloc_semaphore;
extern volatile uint16_t dwleak_free_semaphore;

#endif
