/* The signal the kernel program sends a thread to stop it for the tracer
 * (bpf_send_signal_thread: si_code SI_KERNEL), at the dynamic linker's
 * hook and at exit() (bpf/linker.bpf.h, bpf/exit.bpf.h), and which
 * target/tracee.c tells from the program's own signals.  Under ptrace its
 * signal-delivery-stop is the stop, and the tracer resumes the thread
 * without it.  SIGCONT, not SIGSTOP: a tracer killed (SIGKILL) while the
 * signal is on its way leaves it to be delivered untraced, where SIGSTOP
 * would stop the program for good and SIGCONT does nothing. */
#ifndef DWLEAK_STOP_SIGNAL_H
#define DWLEAK_STOP_SIGNAL_H

#define DWLEAK_STOP_SIGNAL 18 /* SIGCONT on x86_64 and arm64 */

#endif
