/* Registers the program's own unwind tables with libgcc (as JITs do for generated code) and
 * then walks its stack: libgcc sorts the registered tables on first use, calling malloc while
 * it holds the lock of its registered objects. A recorder that walked the stack from that
 * malloc would take the same lock again and hang. Prints "frames 1" when the walk worked. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern void __register_frame_info(const void *begin, void *object);

/* libgcc's `struct object`, opaque here; larger than the real one. */
static struct {
    void *pad[16];
} object;
static const unsigned char *eh_frame;

/* Finds the executable's .eh_frame through its .eh_frame_hdr (the first module). */
static int find_eh_frame(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_GNU_EH_FRAME)
            continue;
        const unsigned char *hdr =
            (const unsigned char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        /* eh_frame_ptr encoded as DW_EH_PE_pcrel | DW_EH_PE_sdata4, right after the header. */
        if (hdr[1] == 0x1b) {
            int32_t offset;
            memcpy(&offset, hdr + 4, 4);
            eh_frame = hdr + 4 + offset;
        }
        return 1;
    }
    return 0;
}

__attribute__((noinline)) static int walk(void) {
    void *frames[16];
    return backtrace(frames, 16);
}

int main(void) {
    void *frames[4];
    backtrace(frames, 4); /* loads libgcc_s first */
    dl_iterate_phdr(find_eh_frame, 0);
    if (!eh_frame) {
        puts("no eh_frame");
        return 1;
    }
    __register_frame_info(eh_frame, &object);
    printf("frames %d\n", walk() > 0);
    return 0;
}
