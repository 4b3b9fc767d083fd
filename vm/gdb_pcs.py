# gdb's own walk of the stopped process it attached to, one frame a line
# as vm/walk_a64 prints them ("pc 0x..."), with gdb's name for each:
# the oracle for the aarch64 walk step in vm/check_arm64.sh.
import gdb

frame = gdb.newest_frame()
while frame is not None:
    print("pc %#x %s" % (frame.pc(), frame.name() or "??"))
    frame = frame.older()
