! The Fortran module's calls an HPC code makes, and its errors: placing an
! allocatable the program already has, where its pages are, binding a
! team member, a bad policy and a freed array as statuses with messages;
! an array allocated and verified under every memory policy of the grammar
! on the machine's first node, existing arrays placed by several, and an
! OpenMP team bound by the scatter thread policy, each thread checked on
! its own CPU (built with -fopenmp).
! Prints one line per case: "ok CASE ..." or "FAIL CASE ..."; stops with
! code 1 when any failed.
program check
  use numalab
  use omp_lib
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
  integer(c_int) :: node_ids(NUMALAB_MAX_NODES), cpu_ids(NUMALAB_MAX_CPUS)
  integer(c_size_t) :: ncpus
  integer :: nnodes, i, team
  character(len=40) :: policies(8), placements(3)
  integer, allocatable :: member_cpu(:), member_running(:), member_status(:), member_verified(:)
  ! member_verified: how many CPUs the thread may run on once bound (1).
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

  ! Every memory policy of the grammar, 64 pages each, on the first node.
  call numalab_nodes(everything, node_ids, nnodes, status)
  call expect('the nodes of all', status, NUMALAB_OK)
  write (policies(1), '(a)') 'first-touch'
  write (policies(2), '(a)') 'local'
  write (policies(3), '(a, i0)') 'bind:', node_ids(1)
  write (policies(4), '(a, i0)') 'preferred:', node_ids(1)
  write (policies(5), '(a, i0)') 'interleave:', node_ids(1)
  write (policies(6), '(a, i0, a)') 'interleave:', node_ids(1), '@4'
  write (policies(7), '(a, i0, a)') 'weighted:', node_ids(1), '=3'
  write (policies(8), '(a, i0, a)') 'weighted:', node_ids(1), '=2@2'
  do i = 1, size(policies)
     call numalab_allocate(m, p, 32768_c_size_t, trim(policies(i)), status)
     call expect('allocate with '//trim(policies(i)), status, NUMALAB_OK)
     if (status /= NUMALAB_OK) cycle
     p = real(i, c_double)
     call numalab_verify_array(p, bc, status)
     if (status == NUMALAB_OK .and. bc%verified == 1 .and. bc%pages%total == 64 &
          .and. bc%pages%untouched == 0 .and. (i <= 2 .or. bc%pages%by_node(node_ids(1)) == 64) &
          .and. all(p == real(i, c_double))) then
        print '(a, a, a, a)', 'ok policy ', trim(policies(i)), ' verified: ', numalab_counts_text(bc%pages)
     else
        print '(a, a, a, a)', 'FAIL policy ', trim(policies(i)), ': ', numalab_message(bc)
        failures = failures + 1
     end if
     call numalab_deallocate(p, status)
     call expect('free the '//trim(policies(i))//' array', status, NUMALAB_OK)
  end do

  ! Arrays the program has, placed page by page, in stripes and by weight.
  write (placements(1), '(a, i0)') 'interleave:', node_ids(1)
  write (placements(2), '(a, i0, a)') 'interleave:', node_ids(1), '@2'
  write (placements(3), '(a, i0, a)') 'weighted:', node_ids(1), '=3'
  do i = 1, size(placements)
     x = real(i, c_double)
     call numalab_place(m, x, trim(placements(i)), status)
     call expect('place x by '//trim(placements(i)), status, NUMALAB_OK)
     call numalab_where(x, counts, status)
     if (status == NUMALAB_OK .and. counts%by_node(node_ids(1)) == counts%total &
          .and. counts%total >= 196 .and. all(x == real(i, c_double))) then
        print '(a, a, a, a)', 'ok placed by ', trim(placements(i)), ': ', numalab_counts_text(counts)
     else
        print '(a, a, a, a)', 'FAIL placed by ', trim(placements(i)), ': ', numalab_counts_text(counts)
        failures = failures + 1
     end if
  end do

  ! An OpenMP team, one thread per CPU, bound by the scatter policy.
  status = numalab_set_cpus(everything%p, cpu_ids, int(NUMALAB_MAX_CPUS, c_size_t), ncpus)
  call expect('the CPUs of all', status, NUMALAB_OK)
  team = int(ncpus)
  allocate (member_cpu(0:team - 1), member_running(0:team - 1), member_status(0:team - 1), &
       member_verified(0:team - 1))
  member_cpu = -1
  member_status = -1
  !$omp parallel num_threads(team) default(shared) private(i, cpu, status, tc)
  i = omp_get_thread_num()
  call numalab_bind_member(everything, 'scatter', team, i, cpu, status)
  if (status == NUMALAB_OK) call numalab_check_thread(everything, tc, status)
  member_cpu(i) = cpu
  member_status(i) = status
  member_running(i) = tc%running_cpu
  member_verified(i) = tc%allowed_count
  !$omp end parallel
  do i = 0, team - 1
     if (member_status(i) == NUMALAB_OK .and. member_running(i) == member_cpu(i) &
          .and. member_verified(i) == 1 .and. count(member_cpu == member_cpu(i)) == 1) then
        print '(a, i0, a, i0, a, i0)', 'ok thread ', i, ' of ', team, ' on CPU ', member_cpu(i)
     else
        print '(a, i0, a, i0, a, i0, a, i0)', 'FAIL thread ', i, ' status ', member_status(i), &
             ' cpu ', member_cpu(i), ' running ', member_running(i)
        failures = failures + 1
     end if
  end do

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
