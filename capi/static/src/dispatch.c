/*
 * The consumer entry points of <dat2/udat.h> for libudat.a: each
 * dispatches through the provider table its first handle points at, as
 * libdat2 does. A first handle that no provider of this process handed
 * out (null, garbage, misaligned) is refused before anything is read
 * through it. The IA handle of libudat.a is the provider's own, so no
 * handle table stands in between.
 *
 * The functions themselves are generated from capi/entries.list, the one
 * list of the provider table's slots (consumer_calls.inc), but for
 * dat_extension_op, whose open query names its provider by name.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dat2/dat_ib_extensions.h>

/* capi/src/handle_space.rs, `Spaces`: where the handle spaces of this process
 * start, and how many words of them are readable. Its address is hidden:
 * libudat.a defines it, in whatever program or library links it, so this
 * file reaches it at a fixed offset from its code, not through the GOT. */
struct udat_spaces {
	uintptr_t base;
	uintptr_t words;
};

extern const struct udat_spaces *const udat_handle_spaces __attribute__((visibility("hidden")));

/* The bits of a word's alignment, by which a handle's offset is rotated. */
enum { udat_word_shift = sizeof(uintptr_t) == 8 ? 3 : 2 };

/* The provider table of `handle` if a provider of this process handed it
 * out, an aligned word of a readable handle space that holds a provider
 * word; NULL if not. Inline, so that a dispatch stays a jump into the
 * provider (handle_space.rs: issued), and the word is read once.
 *
 * The handle's offset into the spaces, rotated right by the bits of a
 * word's alignment, is below the readable words exactly when it is in
 * range and aligned: one compare. On x86-64 the test is written in assembly, with
 * its scratch registers named (rax, r10, r11: no argument's), so that a
 * dispatcher of any number of arguments passes them on where they came,
 * with no register moved out and back; the loads are in the order of
 * the portable code (the words, acquired, then the base), which x86-64
 * keeps. */
static inline const DAT_PROVIDER *udat_handle_provider(DAT_HANDLE handle)
{
#if defined(__x86_64__)
	__asm__ goto(
		"mov udat_handle_spaces(%%rip), %%r11\n\t"
		"mov %c[words](%%r11), %%r10\n\t"
		"mov %[handle], %%rax\n\t"
		"sub %c[base](%%r11), %%rax\n\t"
		"ror %[shift], %%rax\n\t"
		"cmp %%r10, %%rax\n\t"
		"jae %l[refused]"
		:
		: [handle] "r"(handle), [words] "i"(offsetof(struct udat_spaces, words)),
		  [base] "i"(offsetof(struct udat_spaces, base)), [shift] "i"(udat_word_shift)
		: "rax", "r10", "r11", "cc", "memory"
		: refused);
	return (const DAT_PROVIDER *)__atomic_load_n((const uintptr_t *)handle, __ATOMIC_RELAXED);
refused:
	return NULL;
#else
	uintptr_t words = __atomic_load_n(&udat_handle_spaces->words, __ATOMIC_ACQUIRE);
	uintptr_t off = (uintptr_t)handle - __atomic_load_n(&udat_handle_spaces->base, __ATOMIC_RELAXED);

	if ((off >> udat_word_shift | off << (8 * sizeof(uintptr_t) - udat_word_shift)) >= words)
		return NULL;
	return (const DAT_PROVIDER *)__atomic_load_n((const uintptr_t *)handle, __ATOMIC_RELAXED);
#endif
}

#include "consumer_calls.inc"

/* src/lib.rs: the table of the provider registered as `name`, registered
 * now if this is its first use; NULL if there is none. */
extern const DAT_PROVIDER *udat_static_provider(const char *name);

/*
 * dat_extension_op, dispatched through its handle's provider as the
 * generated calls are, but for dat_ib_open_query: its handle is null,
 * and, as libdat2's dat_extension_op does, the provider is the one the
 * name after the operation names, whose extended-op slot gets the name
 * as its handle and the rest of the arguments.
 */
DAT_RETURN DAT_API dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...)
{
	const DAT_PROVIDER *provider;
	DAT_RETURN ret;
	va_list args;

	va_start(args, op);
	if (op == (DAT_EXTENDED_OP)DAT_IB_OPEN_QUERY_OP) {
		const char *name = va_arg(args, const char *);

		provider = name ? udat_static_provider(name) : NULL;
		if (name == NULL)
			ret = DAT_INVALID_PARAMETER | DAT_INVALID_ARG3;
		else if (provider == NULL)
			ret = DAT_PROVIDER_NOT_FOUND;
		else
			ret = provider->handle_extendedop_func((DAT_HANDLE)name, op, args);
	} else if ((provider = udat_handle_provider(handle)) == NULL) {
		ret = DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_NO_SUBTYPE;
	} else {
		ret = provider->handle_extendedop_func(handle, op, args);
	}
	va_end(args);
	return ret;
}
