# SPDX-License-Identifier: Apache-2.0
"""cffi declarations of the structs bpfkit passes to and reads from the kernel.

These mirror include/uapi/linux/bpf.h and include/uapi/linux/perf_event.h of Linux 6.12 field for
field; tests/test_layout.py compiles a C program against the UAPI headers and checks every
offset and size declared here. Conventions:

* ``__aligned_u64`` is ``uint64_t``: on the 64-bit ABIs bpfkit supports it is 8-aligned anyway.
* Unnamed padding (``__u32 :32``) becomes a field named ``_padN``.
* Bitfields the kernel declares (perf_event_attr's flag bits, bpf_prog_info.gpl_compatible) are
  one integer here, named ``_bits_*`` or ``flags``, with bit constants in :mod:`.consts`; the
  layout test checks those bit positions separately.
* The kernel's struct-size versioning (bpf_attr, perf_event_attr, info structs) means newer
  fields may be left zero and older kernels accept shorter structs, so declaring 6.12's layout
  is safe on older kernels as long as callers pass the size the feature needs.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the cffi package (~1.5 ms: cffi.api, cffi.model) only parses CDEF
if TYPE_CHECKING:
    import cffi

BPF_OBJ_NAME_LEN = 16
BPF_TAG_SIZE = 8

CDEF = r"""
/* ---------------------------------------------------------------- bpf(2) */
union bpf_attr {
    struct { /* BPF_MAP_CREATE */
        uint32_t map_type;
        uint32_t key_size;
        uint32_t value_size;
        uint32_t max_entries;
        uint32_t map_flags;
        uint32_t inner_map_fd;
        uint32_t numa_node;
        char     map_name[16];
        uint32_t map_ifindex;
        uint32_t btf_fd;
        uint32_t btf_key_type_id;
        uint32_t btf_value_type_id;
        uint32_t btf_vmlinux_value_type_id;
        uint64_t map_extra;
        int32_t  value_type_btf_obj_fd;
        int32_t  map_token_fd;
    };
    struct { /* BPF_MAP_{LOOKUP,UPDATE,DELETE}_ELEM, GET_NEXT_KEY, LOOKUP_AND_DELETE, FREEZE */
        uint32_t map_fd;
        uint64_t key;
        union {
            uint64_t value;
            uint64_t next_key;
        };
        uint64_t flags;
    };
    struct { /* BPF_MAP_*_BATCH */
        uint64_t in_batch;
        uint64_t out_batch;
        uint64_t keys;
        uint64_t values;
        uint32_t count;
        uint32_t map_fd;
        uint64_t elem_flags;
        uint64_t flags;
    } batch;
    struct { /* BPF_PROG_LOAD */
        uint32_t prog_type;
        uint32_t insn_cnt;
        uint64_t insns;
        uint64_t license;
        uint32_t log_level;
        uint32_t log_size;
        uint64_t log_buf;
        uint32_t kern_version;
        uint32_t prog_flags;
        char     prog_name[16];
        uint32_t prog_ifindex;
        uint32_t expected_attach_type;
        uint32_t prog_btf_fd;
        uint32_t func_info_rec_size;
        uint64_t func_info;
        uint32_t func_info_cnt;
        uint32_t line_info_rec_size;
        uint64_t line_info;
        uint32_t line_info_cnt;
        uint32_t attach_btf_id;
        union {
            uint32_t attach_prog_fd;
            uint32_t attach_btf_obj_fd;
        };
        uint32_t core_relo_cnt;
        uint64_t fd_array;
        uint64_t core_relos;
        uint32_t core_relo_rec_size;
        uint32_t log_true_size;
        int32_t  prog_token_fd;
    };
    struct { /* BPF_OBJ_PIN, BPF_OBJ_GET */
        uint64_t pathname;
        uint32_t bpf_fd;
        uint32_t file_flags;
        int32_t  path_fd;
    };
    struct { /* BPF_PROG_ATTACH, BPF_PROG_DETACH */
        union {
            uint32_t target_fd;
            uint32_t target_ifindex;
        };
        uint32_t attach_bpf_fd;
        uint32_t attach_type;
        uint32_t attach_flags;
        uint32_t replace_bpf_fd;
        union {
            uint32_t relative_fd;
            uint32_t relative_id;
        };
        uint64_t expected_revision;
    };
    struct { /* BPF_PROG_TEST_RUN */
        uint32_t prog_fd;
        uint32_t retval;
        uint32_t data_size_in;
        uint32_t data_size_out;
        uint64_t data_in;
        uint64_t data_out;
        uint32_t repeat;
        uint32_t duration;
        uint32_t ctx_size_in;
        uint32_t ctx_size_out;
        uint64_t ctx_in;
        uint64_t ctx_out;
        uint32_t flags;
        uint32_t cpu;
        uint32_t batch_size;
    } test;
    struct { /* BPF_*_GET_NEXT_ID, BPF_*_GET_FD_BY_ID */
        union {
            uint32_t start_id;
            uint32_t prog_id;
            uint32_t map_id;
            uint32_t btf_id;
            uint32_t link_id;
        };
        uint32_t next_id;
        uint32_t open_flags;
    };
    struct { /* BPF_OBJ_GET_INFO_BY_FD */
        uint32_t bpf_fd;
        uint32_t info_len;
        uint64_t info;
    } info;
    struct { /* BPF_PROG_QUERY */
        union {
            uint32_t target_fd;
            uint32_t target_ifindex;
        };
        uint32_t attach_type;
        uint32_t query_flags;
        uint32_t attach_flags;
        uint64_t prog_ids;
        union {
            uint32_t prog_cnt;
            uint32_t count;
        };
        uint32_t _pad0;
        uint64_t prog_attach_flags;
        uint64_t link_ids;
        uint64_t link_attach_flags;
        uint64_t revision;
    } query;
    struct { /* BPF_RAW_TRACEPOINT_OPEN */
        uint64_t name;
        uint32_t prog_fd;
        uint32_t _pad0;
        uint64_t cookie;
    } raw_tracepoint;
    struct { /* BPF_BTF_LOAD */
        uint64_t btf;
        uint64_t btf_log_buf;
        uint32_t btf_size;
        uint32_t btf_log_size;
        uint32_t btf_log_level;
        uint32_t btf_log_true_size;
        uint32_t btf_flags;
        int32_t  btf_token_fd;
    };
    struct { /* BPF_TASK_FD_QUERY */
        uint32_t pid;
        uint32_t fd;
        uint32_t flags;
        uint32_t buf_len;
        uint64_t buf;
        uint32_t prog_id;
        uint32_t fd_type;
        uint64_t probe_offset;
        uint64_t probe_addr;
    } task_fd_query;
    struct { /* BPF_LINK_CREATE */
        union {
            uint32_t prog_fd;
            uint32_t map_fd;
        };
        union {
            uint32_t target_fd;
            uint32_t target_ifindex;
        };
        uint32_t attach_type;
        uint32_t flags;
        union {
            uint32_t target_btf_id;
            struct {
                uint64_t iter_info;
                uint32_t iter_info_len;
            };
            struct {
                uint64_t bpf_cookie;
            } perf_event;
            struct {
                uint32_t flags;
                uint32_t cnt;
                uint64_t syms;
                uint64_t addrs;
                uint64_t cookies;
            } kprobe_multi;
            struct {
                uint32_t target_btf_id;
                uint64_t cookie;
            } tracing;
            struct {
                uint32_t pf;
                uint32_t hooknum;
                int32_t  priority;
                uint32_t flags;
            } netfilter;
            struct {
                union {
                    uint32_t relative_fd;
                    uint32_t relative_id;
                };
                uint64_t expected_revision;
            } tcx;
            struct {
                uint64_t path;
                uint64_t offsets;
                uint64_t ref_ctr_offsets;
                uint64_t cookies;
                uint32_t cnt;
                uint32_t flags;
                uint32_t pid;
            } uprobe_multi;
            struct {
                union {
                    uint32_t relative_fd;
                    uint32_t relative_id;
                };
                uint64_t expected_revision;
            } netkit;
        };
    } link_create;
    struct { /* BPF_LINK_UPDATE */
        uint32_t link_fd;
        union {
            uint32_t new_prog_fd;
            uint32_t new_map_fd;
        };
        uint32_t flags;
        union {
            uint32_t old_prog_fd;
            uint32_t old_map_fd;
        };
    } link_update;
    struct { /* BPF_LINK_DETACH */
        uint32_t link_fd;
    } link_detach;
    struct { /* BPF_ENABLE_STATS */
        uint32_t type;
    } enable_stats;
    struct { /* BPF_ITER_CREATE */
        uint32_t link_fd;
        uint32_t flags;
    } iter_create;
    struct { /* BPF_PROG_BIND_MAP */
        uint32_t prog_fd;
        uint32_t map_fd;
        uint32_t flags;
    } prog_bind_map;
    struct { /* BPF_TOKEN_CREATE */
        uint32_t flags;
        uint32_t bpffs_fd;
    } token_create;
};

struct bpf_prog_info {
    uint32_t type;
    uint32_t id;
    uint8_t  tag[8];
    uint32_t jited_prog_len;
    uint32_t xlated_prog_len;
    uint64_t jited_prog_insns;
    uint64_t xlated_prog_insns;
    uint64_t load_time;
    uint32_t created_by_uid;
    uint32_t nr_map_ids;
    uint64_t map_ids;
    char     name[16];
    uint32_t ifindex;
    uint32_t _bits_gpl_compatible;   /* bit 0: gpl_compatible */
    uint64_t netns_dev;
    uint64_t netns_ino;
    uint32_t nr_jited_ksyms;
    uint32_t nr_jited_func_lens;
    uint64_t jited_ksyms;
    uint64_t jited_func_lens;
    uint32_t btf_id;
    uint32_t func_info_rec_size;
    uint64_t func_info;
    uint32_t nr_func_info;
    uint32_t nr_line_info;
    uint64_t line_info;
    uint64_t jited_line_info;
    uint32_t nr_jited_line_info;
    uint32_t line_info_rec_size;
    uint32_t jited_line_info_rec_size;
    uint32_t nr_prog_tags;
    uint64_t prog_tags;
    uint64_t run_time_ns;
    uint64_t run_cnt;
    uint64_t recursion_misses;
    uint32_t verified_insns;
    uint32_t attach_btf_obj_id;
    uint32_t attach_btf_id;
};

struct bpf_map_info {
    uint32_t type;
    uint32_t id;
    uint32_t key_size;
    uint32_t value_size;
    uint32_t max_entries;
    uint32_t map_flags;
    char     name[16];
    uint32_t ifindex;
    uint32_t btf_vmlinux_value_type_id;
    uint64_t netns_dev;
    uint64_t netns_ino;
    uint32_t btf_id;
    uint32_t btf_key_type_id;
    uint32_t btf_value_type_id;
    uint32_t btf_vmlinux_id;
    uint64_t map_extra;
};

struct bpf_btf_info {
    uint64_t btf;
    uint32_t btf_size;
    uint32_t id;
    uint64_t name;
    uint32_t name_len;
    uint32_t kernel_btf;
};

struct bpf_link_info {
    uint32_t type;
    uint32_t id;
    uint32_t prog_id;
    union {
        struct {
            uint64_t tp_name;
            uint32_t tp_name_len;
        } raw_tracepoint;
        struct {
            uint32_t attach_type;
            uint32_t target_obj_id;
            uint32_t target_btf_id;
        } tracing;
        struct {
            uint64_t cgroup_id;
            uint32_t attach_type;
        } cgroup;
        struct {
            uint64_t target_name;
            uint32_t target_name_len;
            union {
                struct {
                    uint32_t map_id;
                } map;
            };
            union {
                struct {
                    uint64_t cgroup_id;
                    uint32_t order;
                } cgroup;
                struct {
                    uint32_t tid;
                    uint32_t pid;
                } task;
            };
        } iter;
        struct {
            uint32_t netns_ino;
            uint32_t attach_type;
        } netns;
        struct {
            uint32_t ifindex;
        } xdp;
        struct {
            uint32_t map_id;
        } struct_ops;
        struct {
            uint32_t pf;
            uint32_t hooknum;
            int32_t  priority;
            uint32_t flags;
        } netfilter;
        struct {
            uint64_t addrs;
            uint32_t count;
            uint32_t flags;
            uint64_t missed;
            uint64_t cookies;
        } kprobe_multi;
        struct {
            uint64_t path;
            uint64_t offsets;
            uint64_t ref_ctr_offsets;
            uint64_t cookies;
            uint32_t path_size;
            uint32_t count;
            uint32_t flags;
            uint32_t pid;
        } uprobe_multi;
        struct {
            uint32_t type;
            uint32_t _pad0;
            union {
                struct {
                    uint64_t file_name;
                    uint32_t name_len;
                    uint32_t offset;
                    uint64_t cookie;
                } uprobe;
                struct {
                    uint64_t func_name;
                    uint32_t name_len;
                    uint32_t offset;
                    uint64_t addr;
                    uint64_t missed;
                    uint64_t cookie;
                } kprobe;
                struct {
                    uint64_t tp_name;
                    uint32_t name_len;
                    uint32_t _pad0;
                    uint64_t cookie;
                } tracepoint;
                struct {
                    uint64_t config;
                    uint32_t type;
                    uint32_t _pad0;
                    uint64_t cookie;
                } event;
            };
        } perf_event;
        struct {
            uint32_t ifindex;
            uint32_t attach_type;
        } tcx;
        struct {
            uint32_t ifindex;
            uint32_t attach_type;
        } netkit;
        struct {
            uint32_t map_id;
            uint32_t attach_type;
        } sockmap;
    };
};

struct bpf_func_info {
    uint32_t insn_off;
    uint32_t type_id;
};

struct bpf_line_info {
    uint32_t insn_off;
    uint32_t file_name_off;
    uint32_t line_off;
    uint32_t line_col;
};

struct bpf_insn {
    uint8_t  code;
    uint8_t  _bits_regs;  /* dst_reg:4 (low nibble on little endian), src_reg:4 */
    int16_t  off;
    int32_t  imm;
};

/* ------------------------------------------------------- perf_event_open(2) */
struct perf_event_attr {
    uint32_t type;
    uint32_t size;
    uint64_t config;
    union {
        uint64_t sample_period;
        uint64_t sample_freq;
    };
    uint64_t sample_type;
    uint64_t read_format;
    uint64_t flags;            /* disabled:1, inherit:1, ... : see consts.PerfAttrFlag */
    union {
        uint32_t wakeup_events;
        uint32_t wakeup_watermark;
    };
    uint32_t bp_type;
    union {
        uint64_t bp_addr;
        uint64_t kprobe_func;
        uint64_t uprobe_path;
        uint64_t config1;
    };
    union {
        uint64_t bp_len;
        uint64_t kprobe_addr;
        uint64_t probe_offset;
        uint64_t config2;
    };
    uint64_t branch_sample_type;
    uint64_t sample_regs_user;
    uint32_t sample_stack_user;
    int32_t  clockid;
    uint64_t sample_regs_intr;
    uint32_t aux_watermark;
    uint16_t sample_max_stack;
    uint16_t __reserved_2;
    uint32_t aux_sample_size;
    uint32_t aux_action;       /* aux_start_paused:1, aux_pause:1, aux_resume:1 (6.13); was __reserved_3 */
    uint64_t sig_data;
    uint64_t config3;
};

struct perf_event_mmap_page {
    uint32_t version;
    uint32_t compat_version;
    uint32_t lock;
    uint32_t index;
    int64_t  offset;
    uint64_t time_enabled;
    uint64_t time_running;
    uint64_t capabilities;
    uint16_t pmc_width;
    uint16_t time_shift;
    uint32_t time_mult;
    uint64_t time_offset;
    uint64_t time_zero;
    uint32_t size;
    uint32_t __reserved_1;
    uint64_t time_cycles;
    uint64_t time_mask;
    uint8_t  __reserved[928];
    uint64_t data_head;
    uint64_t data_tail;
    uint64_t data_offset;
    uint64_t data_size;
    uint64_t aux_head;
    uint64_t aux_tail;
    uint64_t aux_offset;
    uint64_t aux_size;
};

struct perf_event_header {
    uint32_t type;
    uint16_t misc;
    uint16_t size;
};

struct perf_event_query_bpf {
    uint32_t ids_len;
    uint32_t prog_cnt;
    uint32_t ids[];
};

/* ------------------------------------------------------------------ libc */
long syscall(long number, ...);
int ioctl(int fd, unsigned long request, ...);
int mount(const char *source, const char *target, const char *fstype, unsigned long flags, const void *data);
int setns(int fd, int nstype);
int statfs(const char *path, void *buf);
"""

# Structs whose layout tests/test_layout.py checks against the UAPI headers, with the C spelling.
CHECKED_TYPES = {
    "union bpf_attr": "union bpf_attr",
    "struct bpf_prog_info": "struct bpf_prog_info",
    "struct bpf_map_info": "struct bpf_map_info",
    "struct bpf_btf_info": "struct bpf_btf_info",
    "struct bpf_link_info": "struct bpf_link_info",
    "struct bpf_func_info": "struct bpf_func_info",
    "struct bpf_line_info": "struct bpf_line_info",
    "struct bpf_insn": "struct bpf_insn",
    "struct perf_event_attr": "struct perf_event_attr",
    "struct perf_event_mmap_page": "struct perf_event_mmap_page",
    "struct perf_event_header": "struct perf_event_header",
    "struct perf_event_query_bpf": "struct perf_event_query_bpf",
}


def build_ffi() -> cffi.FFI:
    """Parse CDEF (about 0.15-0.3 s): what scripts/gen_abi.py pre-computes into _abi_ffi.py."""
    import cffi

    fresh = cffi.FFI()
    fresh.cdef(CDEF, packed=False)
    return fresh


# cffi's out-of-line ABI mode: the parsed declarations are stored as a generated module that
# imports in ~10 ms, which keeps `bpfkit attach` start-up short; it needs only _cffi_backend,
# not the cffi package. tests/test_abi_generated.py
# fails when the generated module no longer matches CDEF (regenerate: scripts/gen_abi.py).
try:
    from ._abi_ffi import ffi as ffi
except ImportError:  # pragma: no cover - a tree without the generated module still works
    ffi = build_ffi()
libc = ffi.dlopen(None)
