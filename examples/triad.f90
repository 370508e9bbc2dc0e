! The triad of the 2007 placement framework in Fortran: a = b + s * c with
! each array on its own node (bind:0, bind:1, bind:2 where the machine has
! three memory nodes; fewer are reused in turn), the thread bound to the
! first CPU of the first node, every placement verified from the kernel.
!
!   gfortran -O2 triad.f90 $(pkg-config --cflags --libs numalab-fortran) -o triad_f
!   ./triad_f [ELEMENTS]
program triad
  use numalab
  use, intrinsic :: iso_c_binding
  implicit none
  type(numalab_machine_t) :: m
  type(numalab_set_t) :: all, home
  type(numalab_buffer_check) :: check
  type(numalab_thread_check) :: tcheck
  real(c_double), pointer :: a(:), b(:), c(:)
  integer(c_int) :: nodes(NUMALAB_MAX_NODES)
  integer(c_size_t) :: n
  integer :: status, count, cpu, rep
  character(len=32) :: arg, policy(3)
  character(len=1), parameter :: names(3) = ['a', 'b', 'c']
  integer(8) :: t0, t1, rate
  real(8) :: best, seconds
  integer :: i

  n = 4194304_c_size_t
  if (command_argument_count() >= 1) then
     call get_command_argument(1, arg)
     read (arg, *) n
  end if
  call numalab_init(m, status)
  call stop_on(status, 'machine')
  call numalab_set(m, 'all', all, status)
  call stop_on(status, 'set')
  call numalab_nodes(all, nodes, count, status)
  call stop_on(status, 'nodes')
  print '(a, i0, a)', 'machine: ', count, ' memory node(s)'

  write (arg, '(a, i0)') 'node:', nodes(1)
  call numalab_set(m, trim(arg), home, status)
  call stop_on(status, 'home set')
  call numalab_bind_member(home, 'compact', 1, 0, cpu, status)
  call stop_on(status, 'bind')
  call numalab_check_thread(home, tcheck, status)
  call stop_on(status, 'thread check')

  do i = 1, 3
     write (policy(i), '(a, i0)') 'bind:', nodes(mod(i - 1, count) + 1)
  end do
  call numalab_allocate(m, a, n, trim(policy(1)), status)
  call stop_on(status, 'allocate a')
  call numalab_allocate(m, b, n, trim(policy(2)), status)
  call stop_on(status, 'allocate b')
  call numalab_allocate(m, c, n, trim(policy(3)), status)
  call stop_on(status, 'allocate c')
  call report(a, 1)
  call report(b, 2)
  call report(c, 3)
  if (tcheck%verified == 1) then
     print '(a, i0, a)', 'thread: CPU ', cpu, ' verified'
  else
     print '(a, i0, a)', 'thread: CPU ', cpu, ' NOT VERIFIED'
  end if

  b = 1.0d0
  c = 2.0d0
  best = huge(best)
  call system_clock(count_rate=rate)
  do rep = 1, 5
     call system_clock(t0)
     a = b + 3.0d0 * c
     call system_clock(t1)
     seconds = real(t1 - t0, 8) / real(rate, 8)
     best = min(best, seconds)
  end do
  if (a(1) == 7.0d0 .and. a(n) == 7.0d0) then
     print '(a, i0, a, f0.3, a)', 'triad: ', n, ' elements, best of 5 ', best * 1d3, ' ms, result correct'
  else
     print '(a)', 'triad: result WRONG'
     stop 1
  end if
  call numalab_deallocate(a, status)
  call numalab_deallocate(b, status)
  call numalab_deallocate(c, status)
  call numalab_finalize(m, status)

contains

  subroutine report(x, k)
    real(c_double), pointer, intent(in) :: x(:)
    integer, intent(in) :: k
    integer :: s
    call numalab_verify_array(x, check, s)
    call stop_on(s, 'verify')
    if (check%verified == 1) then
       print '(a, a, a, a, a, a)', names(k), ': ', trim(policy(k)), '  verified  ', numalab_counts_text(check%pages)
    else
       print '(a, a, a, a, a)', names(k), ': ', trim(policy(k)), '  NOT VERIFIED: ', numalab_message(check)
    end if
  end subroutine report

  subroutine stop_on(s, what)
    integer, intent(in) :: s
    character(len=*), intent(in) :: what
    if (s /= NUMALAB_OK) then
       print '(a, a, a, a)', 'triad: ', what, ': ', numalab_error()
       stop 1
    end if
  end subroutine stop_on

end program triad
