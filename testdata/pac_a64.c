/* An aarch64 library built with -mbranch-protection=standard (testdata/
 * Makefile): its non-leaf functions sign their return address (paciasp)
 * and say so in their CFI (DW_CFA_AARCH64_negate_ra_state), which Debian
 * 12's own arm64 builds do not.  tests/tables_arm64.sh checks the table's
 * signing state against the disassembly; the table fuzzer starts from it. */
int leaf(int x);
int callee(int x);
int mid(int x);
int outer(int x);

int leaf(int x)
{
	return x * 3;
}

int mid(int x)
{
	return callee(x) + leaf(x) + 1;
}

int outer(int x)
{
	int a[16];

	for (int i = 0; i < 16; i++)
		a[i] = mid(x + i);
	return a[3] + a[x & 15];
}
