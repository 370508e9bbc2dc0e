! numalab: libnumalab for Fortran programs, through iso_c_binding.
!
! What HPC Fortran codes need: load the machine, name CPUs and nodes in
! numalab's set grammar, bind this thread (or the n-th thread of an OpenMP
! team by a thread policy), allocate an array with a memory policy, place
! an array the program already has, and verify where every page of an
! array is. The raw C interfaces (numalab_machine_load, numalab_alloc,
! ...) are here too, under their C names, for anything else (docs/api.md).
!
! Build: scripts/install-lib.sh installs numalab.mod and
! libnumalab_fortran.a; then
!   gfortran prog.f90 $(pkg-config --cflags --libs numalab-fortran)
!
! Every routine has a status argument: NUMALAB_OK (0) or a NUMALAB_E_*
! code, with numalab_error() naming the problem in one line.
module numalab
  use, intrinsic :: iso_c_binding
  implicit none
  private

  integer(c_int), parameter, public :: NUMALAB_OK = 0, NUMALAB_E_INVALID = 1, &
       NUMALAB_E_NULL = 2, NUMALAB_E_HANDLE = 3, NUMALAB_E_OVERFLOW = 4, &
       NUMALAB_E_UNSUPPORTED = 5, NUMALAB_E_PERMISSION = 6, NUMALAB_E_CAPACITY = 7, &
       NUMALAB_E_OS = 8, NUMALAB_E_TRUNCATED = 9, NUMALAB_E_INTERNAL = 10
  integer, parameter, public :: NUMALAB_MAX_NODES = 1024, NUMALAB_MAX_CPUS = 8192, &
       NUMALAB_MESSAGE_BYTES = 1024
  integer(c_int), parameter, public :: NUMALAB_POLICY_BIND = 0, NUMALAB_POLICY_INTERLEAVE = 1, &
       NUMALAB_POLICY_PREFERRED = 2, NUMALAB_POLICY_FIRST_TOUCH = 3, NUMALAB_POLICY_LOCAL = 4
  integer(c_int), parameter, public :: NUMALAB_ALLOC_THP_ON = 1, NUMALAB_ALLOC_THP_OFF = 2, &
       NUMALAB_ALLOC_HUGETLB = 4, NUMALAB_ALLOC_WEIGHTED_KERNEL = 8, NUMALAB_ALLOC_LAZY = 16
  integer(c_int), parameter, public :: NUMALAB_PLACE_NO_MOVE = 1, NUMALAB_PLACE_STRICT = 2

  !> Pages of a range by node (numalab_page_counts); by_node(n) for node n.
  type, bind(c), public :: numalab_page_counts
     integer(c_int64_t) :: page_size, total, untouched, unknown
     integer(c_int64_t) :: by_node(0:NUMALAB_MAX_NODES - 1)
  end type numalab_page_counts

  !> An array checked against its policy (numalab_buffer_check).
  type, bind(c), public :: numalab_buffer_check
     integer(c_int) :: verified, toucher_cpu
     integer(c_int64_t) :: expected_nodes(0:NUMALAB_MAX_NODES / 64 - 1)
     type(numalab_page_counts) :: pages
     character(kind=c_char) :: message(NUMALAB_MESSAGE_BYTES)
  end type numalab_buffer_check

  !> A thread checked against the CPUs asked (numalab_thread_check).
  type, bind(c), public :: numalab_thread_check
     integer(c_int) :: tid, verified, running_cpu
     integer(c_int) :: allowed_count
     integer(c_int64_t) :: allowed(0:NUMALAB_MAX_CPUS / 64 - 1)
     character(kind=c_char) :: message(NUMALAB_MESSAGE_BYTES)
  end type numalab_thread_check

  !> Handles: a machine, a resource set, a policy.
  type, public :: numalab_machine_t
     type(c_ptr) :: p = c_null_ptr
  end type numalab_machine_t
  type, public :: numalab_set_t
     type(c_ptr) :: p = c_null_ptr
  end type numalab_set_t

  ! The C API, under its own names.
  public :: numalab_last_error, numalab_machine_load, numalab_machine_free, &
       numalab_set_parse, numalab_set_parse_nodes, numalab_set_free, numalab_set_cpus, &
       numalab_set_nodes, numalab_bind_thread, numalab_bind_team_member, numalab_team_cpu, &
       numalab_check_thread_c, numalab_alloc_str, numalab_free, numalab_verify, &
       numalab_range_pages, numalab_place_range_str, numalab_page_counts_format
  ! The Fortran routines.
  public :: numalab_init, numalab_finalize, numalab_set, numalab_set_release, numalab_bind, &
       numalab_bind_member, numalab_check_thread, numalab_allocate, numalab_deallocate, &
       numalab_verify_array, numalab_where, numalab_place, numalab_error, numalab_message, &
       numalab_counts_text, numalab_nodes

  interface
     function numalab_last_error() bind(c, name='numalab_last_error') result(p)
       import :: c_ptr
       type(c_ptr) :: p
     end function numalab_last_error
     function numalab_machine_load(topology_xml, out) bind(c, name='numalab_machine_load') result(s)
       import :: c_ptr, c_int
       type(c_ptr), value :: topology_xml
       type(c_ptr), intent(out) :: out
       integer(c_int) :: s
     end function numalab_machine_load
     function numalab_machine_free(m) bind(c, name='numalab_machine_free') result(s)
       import :: c_ptr, c_int
       type(c_ptr), value :: m
       integer(c_int) :: s
     end function numalab_machine_free
     function numalab_machine_nodes(m, ids, capacity, count) bind(c, name='numalab_machine_nodes') result(s)
       import :: c_ptr, c_int, c_size_t
       type(c_ptr), value :: m
       integer(c_int), intent(out) :: ids(*)
       integer(c_size_t), value :: capacity
       integer(c_size_t), intent(out) :: count
       integer(c_int) :: s
     end function numalab_machine_nodes
     function numalab_set_parse(m, expr, out) bind(c, name='numalab_set_parse') result(s)
       import :: c_ptr, c_int, c_char
       type(c_ptr), value :: m
       character(kind=c_char), intent(in) :: expr(*)
       type(c_ptr), intent(out) :: out
       integer(c_int) :: s
     end function numalab_set_parse
     function numalab_set_parse_nodes(m, expr, out) bind(c, name='numalab_set_parse_nodes') result(s)
       import :: c_ptr, c_int, c_char
       type(c_ptr), value :: m
       character(kind=c_char), intent(in) :: expr(*)
       type(c_ptr), intent(out) :: out
       integer(c_int) :: s
     end function numalab_set_parse_nodes
     function numalab_set_free(set) bind(c, name='numalab_set_free') result(s)
       import :: c_ptr, c_int
       type(c_ptr), value :: set
       integer(c_int) :: s
     end function numalab_set_free
     function numalab_set_cpus(set, ids, capacity, count) bind(c, name='numalab_set_cpus') result(s)
       import :: c_ptr, c_int, c_size_t
       type(c_ptr), value :: set
       integer(c_int), intent(out) :: ids(*)
       integer(c_size_t), value :: capacity
       integer(c_size_t), intent(out) :: count
       integer(c_int) :: s
     end function numalab_set_cpus
     function numalab_set_nodes(set, ids, capacity, count) bind(c, name='numalab_set_nodes') result(s)
       import :: c_ptr, c_int, c_size_t
       type(c_ptr), value :: set
       integer(c_int), intent(out) :: ids(*)
       integer(c_size_t), value :: capacity
       integer(c_size_t), intent(out) :: count
       integer(c_int) :: s
     end function numalab_set_nodes
     function numalab_bind_thread(set) bind(c, name='numalab_bind_thread') result(s)
       import :: c_ptr, c_int
       type(c_ptr), value :: set
       integer(c_int) :: s
     end function numalab_bind_thread
     function numalab_team_cpu(set, policy, team, idx, cpu) bind(c, name='numalab_team_cpu') result(s)
       import :: c_ptr, c_int, c_char, c_size_t
       type(c_ptr), value :: set
       character(kind=c_char), intent(in) :: policy(*)
       integer(c_size_t), value :: team, idx
       integer(c_int), intent(out) :: cpu
       integer(c_int) :: s
     end function numalab_team_cpu
     function numalab_bind_team_member(set, policy, team, idx, cpu) &
          bind(c, name='numalab_bind_team_member') result(s)
       import :: c_ptr, c_int, c_char, c_size_t
       type(c_ptr), value :: set
       character(kind=c_char), intent(in) :: policy(*)
       integer(c_size_t), value :: team, idx
       integer(c_int), intent(out) :: cpu
       integer(c_int) :: s
     end function numalab_bind_team_member
     function numalab_check_thread_c(tid, asked, out) bind(c, name='numalab_check_thread') result(s)
       import :: c_ptr, c_int, numalab_thread_check
       integer(c_int), value :: tid
       type(c_ptr), value :: asked
       type(numalab_thread_check), intent(out) :: out
       integer(c_int) :: s
     end function numalab_check_thread_c
     function numalab_alloc_str(m, size, policy, flags, out) bind(c, name='numalab_alloc_str') result(s)
       import :: c_ptr, c_int, c_char, c_size_t
       type(c_ptr), value :: m
       integer(c_size_t), value :: size
       character(kind=c_char), intent(in) :: policy(*)
       integer(c_int), value :: flags
       type(c_ptr), intent(out) :: out
       integer(c_int) :: s
     end function numalab_alloc_str
     function numalab_free(addr) bind(c, name='numalab_free') result(s)
       import :: c_ptr, c_int
       type(c_ptr), value :: addr
       integer(c_int) :: s
     end function numalab_free
     function numalab_verify(addr, out) bind(c, name='numalab_verify') result(s)
       import :: c_ptr, c_int, numalab_buffer_check
       type(c_ptr), value :: addr
       type(numalab_buffer_check), intent(out) :: out
       integer(c_int) :: s
     end function numalab_verify
     function numalab_range_pages(addr, len, out) bind(c, name='numalab_range_pages') result(s)
       import :: c_ptr, c_int, c_size_t, numalab_page_counts
       type(c_ptr), value :: addr
       integer(c_size_t), value :: len
       type(numalab_page_counts), intent(out) :: out
       integer(c_int) :: s
     end function numalab_range_pages
     function numalab_place_range_str(m, addr, len, policy, flags) &
          bind(c, name='numalab_place_range_str') result(s)
       import :: c_ptr, c_int, c_char, c_size_t
       type(c_ptr), value :: m, addr
       integer(c_size_t), value :: len
       character(kind=c_char), intent(in) :: policy(*)
       integer(c_int), value :: flags
       integer(c_int) :: s
     end function numalab_place_range_str
     function numalab_page_counts_format(counts, buf, capacity, needed) &
          bind(c, name='numalab_page_counts_format') result(s)
       import :: c_ptr, c_int, c_char, c_size_t, numalab_page_counts
       type(numalab_page_counts), intent(in) :: counts
       character(kind=c_char), intent(out) :: buf(*)
       integer(c_size_t), value :: capacity
       type(c_ptr), value :: needed
       integer(c_int) :: s
     end function numalab_page_counts_format
     function c_strlen(p) bind(c, name='strlen') result(n)
       import :: c_ptr, c_size_t
       type(c_ptr), value :: p
       integer(c_size_t) :: n
     end function c_strlen
  end interface

  !> Allocates an array with a memory policy: real(8), real(4) or
  !> integer(4), rank 1.
  interface numalab_allocate
     module procedure allocate_r8, allocate_r4, allocate_i4
  end interface numalab_allocate
  !> Frees an array from numalab_allocate.
  interface numalab_deallocate
     module procedure deallocate_r8, deallocate_r4, deallocate_i4
  end interface numalab_deallocate
  !> Checks an array from numalab_allocate against its policy.
  interface numalab_verify_array
     module procedure verify_r8, verify_r4, verify_i4
  end interface numalab_verify_array
  !> Where the pages of any contiguous array are, by node.
  interface numalab_where
     module procedure where_r8, where_r4, where_i4
  end interface numalab_where
  !> Places an array the program already has with a memory policy.
  interface numalab_place
     module procedure place_r8, place_r4, place_i4
  end interface numalab_place

contains

  !> `text` as a C string.
  pure function cstr(text) result(c)
    character(len=*), intent(in) :: text
    character(kind=c_char, len=len_trim(text) + 1) :: c
    c = trim(text) // c_null_char
  end function cstr

  !> The C string at `p` as Fortran text.
  function from_c(p) result(text)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: text
    character(kind=c_char), pointer :: chars(:)
    integer(c_size_t) :: n, i
    if (.not. c_associated(p)) then
       text = ''
       return
    end if
    n = c_strlen(p)
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: text)
    do i = 1, n
       text(i:i) = chars(i)
    end do
  end function from_c

  !> The one-line message of this thread's last failed call.
  function numalab_error() result(msg)
    character(len=:), allocatable :: msg
    msg = from_c(numalab_last_error())
  end function numalab_error

  !> The message of a check, as Fortran text.
  function numalab_message(check) result(msg)
    type(numalab_buffer_check), intent(in) :: check
    character(len=:), allocatable :: msg
    integer :: n
    n = 0
    do while (n < NUMALAB_MESSAGE_BYTES)
       if (check%message(n + 1) == c_null_char) exit
       n = n + 1
    end do
    allocate(character(len=n) :: msg)
    msg = transfer(check%message(1:n), msg)
  end function numalab_message

  !> Page counts as text: "node 0: 512 pages (50.0%), node 1: ...".
  function numalab_counts_text(counts) result(text)
    type(numalab_page_counts), intent(in) :: counts
    character(len=:), allocatable :: text
    character(kind=c_char) :: buf(4096)
    integer(c_int) :: s
    integer :: n
    s = numalab_page_counts_format(counts, buf, int(size(buf), c_size_t), c_null_ptr)
    n = 0
    do while (n < size(buf))
       if (buf(n + 1) == c_null_char) exit
       n = n + 1
    end do
    allocate(character(len=n) :: text)
    text = transfer(buf(1:n), text)
    if (s /= NUMALAB_OK .and. s /= NUMALAB_E_TRUNCATED) text = numalab_error()
  end function numalab_counts_text

  !> Loads the live machine, or the hwloc XML file `topology`.
  subroutine numalab_init(m, status, topology)
    type(numalab_machine_t), intent(out) :: m
    integer, intent(out) :: status
    character(len=*), intent(in), optional :: topology
    character(kind=c_char), allocatable, target :: path(:)
    integer :: i, n
    if (present(topology)) then
       n = len_trim(topology)
       allocate(path(n + 1))
       do i = 1, n
          path(i) = topology(i:i)
       end do
       path(n + 1) = c_null_char
       status = numalab_machine_load(c_loc(path), m%p)
    else
       status = numalab_machine_load(c_null_ptr, m%p)
    end if
  end subroutine numalab_init

  !> Frees the machine.
  subroutine numalab_finalize(m, status)
    type(numalab_machine_t), intent(inout) :: m
    integer, intent(out) :: status
    status = numalab_machine_free(m%p)
    m%p = c_null_ptr
  end subroutine numalab_finalize

  !> A resource set from an expression of numalab's grammar ("node:1",
  !> "0-3", "all"); with nodes=.true. a bare list means nodes.
  subroutine numalab_set(m, expr, set, status, nodes)
    type(numalab_machine_t), intent(in) :: m
    character(len=*), intent(in) :: expr
    type(numalab_set_t), intent(out) :: set
    integer, intent(out) :: status
    logical, intent(in), optional :: nodes
    logical :: as_nodes
    as_nodes = .false.
    if (present(nodes)) as_nodes = nodes
    if (as_nodes) then
       status = numalab_set_parse_nodes(m%p, cstr(expr), set%p)
    else
       status = numalab_set_parse(m%p, cstr(expr), set%p)
    end if
  end subroutine numalab_set

  !> Frees a set.
  subroutine numalab_set_release(set, status)
    type(numalab_set_t), intent(inout) :: set
    integer, intent(out) :: status
    status = numalab_set_free(set%p)
    set%p = c_null_ptr
  end subroutine numalab_set_release

  !> The memory nodes of a set; `count` gets how many there are.
  subroutine numalab_nodes(set, nodes, count, status)
    type(numalab_set_t), intent(in) :: set
    integer(c_int), intent(out) :: nodes(:)
    integer, intent(out) :: count, status
    integer(c_size_t) :: n
    status = numalab_set_nodes(set%p, nodes, int(size(nodes), c_size_t), n)
    count = int(n)
  end subroutine numalab_nodes

  !> Binds the calling thread to the set's CPUs.
  subroutine numalab_bind(set, status)
    type(numalab_set_t), intent(in) :: set
    integer, intent(out) :: status
    status = numalab_bind_thread(set%p)
  end subroutine numalab_bind

  !> Binds the calling thread, thread `index` (from 0, as
  !> omp_get_thread_num) of a team of `team`, to its CPU under a thread
  !> policy ("compact", "scatter", or a CPU list); `cpu` gets the CPU.
  subroutine numalab_bind_member(set, policy, team, index, cpu, status)
    type(numalab_set_t), intent(in) :: set
    character(len=*), intent(in) :: policy
    integer, intent(in) :: team, index
    integer, intent(out) :: cpu, status
    integer(c_int) :: c
    c = -1
    status = numalab_bind_team_member(set%p, cstr(policy), int(team, c_size_t), int(index, c_size_t), c)
    cpu = c
  end subroutine numalab_bind_member

  !> Checks the calling thread against the CPUs of `asked`.
  subroutine numalab_check_thread(asked, check, status)
    type(numalab_set_t), intent(in) :: asked
    type(numalab_thread_check), intent(out) :: check
    integer, intent(out) :: status
    status = numalab_check_thread_c(0_c_int, asked%p, check)
  end subroutine numalab_check_thread

  subroutine allocate_r8(m, a, n, policy, status, flags)
    type(numalab_machine_t), intent(in) :: m
    real(c_double), pointer, intent(out) :: a(:)
    integer(c_size_t), intent(in) :: n
    character(len=*), intent(in) :: policy
    integer, intent(out) :: status
    integer, intent(in), optional :: flags
    type(c_ptr) :: p
    integer(c_int) :: f
    f = 0
    if (present(flags)) f = int(flags, c_int)
    nullify(a)
    if (n > huge(n) / 8) then
       status = NUMALAB_E_OVERFLOW
       return
    end if
    status = numalab_alloc_str(m%p, n * 8_c_size_t, cstr(policy), f, p)
    if (status == NUMALAB_OK) call c_f_pointer(p, a, [n])
  end subroutine allocate_r8

  subroutine allocate_r4(m, a, n, policy, status, flags)
    type(numalab_machine_t), intent(in) :: m
    real(c_float), pointer, intent(out) :: a(:)
    integer(c_size_t), intent(in) :: n
    character(len=*), intent(in) :: policy
    integer, intent(out) :: status
    integer, intent(in), optional :: flags
    type(c_ptr) :: p
    integer(c_int) :: f
    f = 0
    if (present(flags)) f = int(flags, c_int)
    nullify(a)
    if (n > huge(n) / 4) then
       status = NUMALAB_E_OVERFLOW
       return
    end if
    status = numalab_alloc_str(m%p, n * 4_c_size_t, cstr(policy), f, p)
    if (status == NUMALAB_OK) call c_f_pointer(p, a, [n])
  end subroutine allocate_r4

  subroutine allocate_i4(m, a, n, policy, status, flags)
    type(numalab_machine_t), intent(in) :: m
    integer(c_int32_t), pointer, intent(out) :: a(:)
    integer(c_size_t), intent(in) :: n
    character(len=*), intent(in) :: policy
    integer, intent(out) :: status
    integer, intent(in), optional :: flags
    type(c_ptr) :: p
    integer(c_int) :: f
    f = 0
    if (present(flags)) f = int(flags, c_int)
    nullify(a)
    if (n > huge(n) / 4) then
       status = NUMALAB_E_OVERFLOW
       return
    end if
    status = numalab_alloc_str(m%p, n * 4_c_size_t, cstr(policy), f, p)
    if (status == NUMALAB_OK) call c_f_pointer(p, a, [n])
  end subroutine allocate_i4

  subroutine deallocate_r8(a, status)
    real(c_double), pointer, intent(inout) :: a(:)
    integer, intent(out) :: status
    status = NUMALAB_OK
    if (.not. associated(a)) return
    status = numalab_free(c_loc(a(1)))
    nullify(a)
  end subroutine deallocate_r8

  subroutine deallocate_r4(a, status)
    real(c_float), pointer, intent(inout) :: a(:)
    integer, intent(out) :: status
    status = NUMALAB_OK
    if (.not. associated(a)) return
    status = numalab_free(c_loc(a(1)))
    nullify(a)
  end subroutine deallocate_r4

  subroutine deallocate_i4(a, status)
    integer(c_int32_t), pointer, intent(inout) :: a(:)
    integer, intent(out) :: status
    status = NUMALAB_OK
    if (.not. associated(a)) return
    status = numalab_free(c_loc(a(1)))
    nullify(a)
  end subroutine deallocate_i4

  subroutine verify_r8(a, check, status)
    real(c_double), pointer, intent(in) :: a(:)
    type(numalab_buffer_check), intent(out) :: check
    integer, intent(out) :: status
    status = numalab_verify(c_loc(a(1)), check)
  end subroutine verify_r8

  subroutine verify_r4(a, check, status)
    real(c_float), pointer, intent(in) :: a(:)
    type(numalab_buffer_check), intent(out) :: check
    integer, intent(out) :: status
    status = numalab_verify(c_loc(a(1)), check)
  end subroutine verify_r4

  subroutine verify_i4(a, check, status)
    integer(c_int32_t), pointer, intent(in) :: a(:)
    type(numalab_buffer_check), intent(out) :: check
    integer, intent(out) :: status
    status = numalab_verify(c_loc(a(1)), check)
  end subroutine verify_i4

  subroutine where_r8(a, counts, status)
    real(c_double), intent(in), target, contiguous :: a(:)
    type(numalab_page_counts), intent(out) :: counts
    integer, intent(out) :: status
    status = numalab_range_pages(c_loc(a), int(size(a), c_size_t) * 8_c_size_t, counts)
  end subroutine where_r8

  subroutine where_r4(a, counts, status)
    real(c_float), intent(in), target, contiguous :: a(:)
    type(numalab_page_counts), intent(out) :: counts
    integer, intent(out) :: status
    status = numalab_range_pages(c_loc(a), int(size(a), c_size_t) * 4_c_size_t, counts)
  end subroutine where_r4

  subroutine where_i4(a, counts, status)
    integer(c_int32_t), intent(in), target, contiguous :: a(:)
    type(numalab_page_counts), intent(out) :: counts
    integer, intent(out) :: status
    status = numalab_range_pages(c_loc(a), int(size(a), c_size_t) * 4_c_size_t, counts)
  end subroutine where_i4

  subroutine place_r8(m, a, policy, status, flags)
    type(numalab_machine_t), intent(in) :: m
    real(c_double), intent(inout), target, contiguous :: a(:)
    character(len=*), intent(in) :: policy
    integer, intent(out) :: status
    integer, intent(in), optional :: flags
    integer(c_int) :: f
    f = 0
    if (present(flags)) f = int(flags, c_int)
    status = numalab_place_range_str(m%p, c_loc(a), int(size(a), c_size_t) * 8_c_size_t, cstr(policy), f)
  end subroutine place_r8

  subroutine place_r4(m, a, policy, status, flags)
    type(numalab_machine_t), intent(in) :: m
    real(c_float), intent(inout), target, contiguous :: a(:)
    character(len=*), intent(in) :: policy
    integer, intent(out) :: status
    integer, intent(in), optional :: flags
    integer(c_int) :: f
    f = 0
    if (present(flags)) f = int(flags, c_int)
    status = numalab_place_range_str(m%p, c_loc(a), int(size(a), c_size_t) * 4_c_size_t, cstr(policy), f)
  end subroutine place_r4

  subroutine place_i4(m, a, policy, status, flags)
    type(numalab_machine_t), intent(in) :: m
    integer(c_int32_t), intent(inout), target, contiguous :: a(:)
    character(len=*), intent(in) :: policy
    integer, intent(out) :: status
    integer, intent(in), optional :: flags
    integer(c_int) :: f
    f = 0
    if (present(flags)) f = int(flags, c_int)
    status = numalab_place_range_str(m%p, c_loc(a), int(size(a), c_size_t) * 4_c_size_t, cstr(policy), f)
  end subroutine place_i4

end module numalab
