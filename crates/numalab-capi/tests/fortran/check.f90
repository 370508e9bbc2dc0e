! The Fortran module's calls an HPC code makes, and its errors: placing an
! allocatable the program already has, where its pages are, binding a
! team member, a bad policy and a freed array as statuses with messages.
! Prints one line per case: "ok CASE ..." or "FAIL CASE ..."; stops with
! code 1 when any failed.
program check
  use numalab
  use, intrinsic :: iso_c_binding
  implicit none
  type(numalab_machine_t) :: m
  type(numalab_set_t) :: everything
  type(numalab_page_counts) :: counts
  type(numalab_buffer_check) :: bc
  type(numalab_thread_check) :: tc
  real(c_double), allocatable, target :: x(:)
  real(c_double), pointer :: p(:), q(:)
  integer(c_int32_t), pointer :: k(:)
  integer :: status, cpu, failures
  failures = 0

  call numalab_init(m, status)
  call expect('load the live machine', status, NUMALAB_OK)
  call numalab_set(m, 'all', everything, status)
  call expect('the set all', status, NUMALAB_OK)

  allocate (x(100000))
  x = 1.0d0
  call numalab_place(m, x, 'bind:0', status)
  call expect('place an allocatable on node 0', status, NUMALAB_OK)
  call numalab_where(x, counts, status)
  call expect('where its pages are', status, NUMALAB_OK)
  if (counts%by_node(0) == counts%total .and. counts%total >= 196) then
     print '(a, i0, a)', 'ok all ', counts%total, ' pages of x on node 0'
  else
     print '(a, a)', 'FAIL pages of x: ', numalab_counts_text(counts)
     failures = failures + 1
  end if
  if (all(x == 1.0d0)) then
     print '(a)', 'ok x kept its values'
  else
     print '(a)', 'FAIL x changed'
     failures = failures + 1
  end if

  call numalab_bind_member(everything, 'scatter', 1, 0, cpu, status)
  call expect('bind as member 0 of a team of 1', status, NUMALAB_OK)
  call numalab_check_thread(everything, tc, status)
  call expect('check this thread', status, NUMALAB_OK)
  if (tc%verified == 1 .and. tc%running_cpu == cpu) then
     print '(a, i0)', 'ok running on CPU ', cpu
  else
     print '(a, i0)', 'FAIL not running on CPU ', cpu
     failures = failures + 1
  end if

  call numalab_allocate(m, k, 5000_c_size_t, 'interleave:0@2', status)
  call expect('allocate integers striped', status, NUMALAB_OK)
  call numalab_verify_array(k, bc, status)
  call expect('verify them', status, NUMALAB_OK)
  if (bc%verified == 1 .and. bc%pages%total == 5) then
     print '(a)', 'ok 5 pages verified'
  else
     print '(a, a)', 'FAIL ', numalab_message(bc)
     failures = failures + 1
  end if
  call numalab_deallocate(k, status)
  call expect('free them', status, NUMALAB_OK)

  call numalab_allocate(m, p, 10_c_size_t, 'scatter', status)
  call expect('a bad policy', status, NUMALAB_E_INVALID)
  if (index(numalab_error(), "unknown memory policy 'scatter'") > 0 .and. .not. associated(p)) then
     print '(a)', 'ok the message names it'
  else
     print '(a, a)', 'FAIL message: ', numalab_error()
     failures = failures + 1
  end if
  call numalab_allocate(m, p, huge(0_c_size_t), 'bind:0', status)
  call expect('a size that overflows', status, NUMALAB_E_OVERFLOW)

  call numalab_allocate(m, p, 10_c_size_t, 'bind:0', status)
  q => p
  call numalab_deallocate(p, status)
  call expect('free an array', status, NUMALAB_OK)
  call numalab_deallocate(q, status)
  call expect('free it again through another pointer', status, NUMALAB_E_HANDLE)

  call numalab_set_release(everything, status)
  call numalab_bind(everything, status)
  call expect('bind to a released set', status, NUMALAB_E_NULL)
  call numalab_finalize(m, status)
  call expect('free the machine', status, NUMALAB_OK)
  print '(a, i0)', 'failures=', failures
  if (failures > 0) stop 1

contains

  subroutine expect(what, got, want)
    character(len=*), intent(in) :: what
    integer, intent(in) :: got, want
    if (got == want) then
       print '(a, a, a, i0)', 'ok ', what, ': status ', got
    else
       print '(a, a, a, i0, a, i0, a, a)', 'FAIL ', what, ': status ', got, ' want ', want, ': ', numalab_error()
       failures = failures + 1
    end if
  end subroutine expect

end program check
