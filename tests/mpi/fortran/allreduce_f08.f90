! MPI_REAL allreduce through `use mpi_f08`: handles are derived types, the binding symbol is
! mpi_allreduce_f08_, and ierror is optional (absent here in two of the three calls, so the
! library must not write through a null ierror). Interception is checked from outside, through the
! OPTIREDUCE_REPORT file (3 calls per rank).
program allreduce_f08
  use mpi_f08
  implicit none
  integer, parameter :: n = 100003
  real, allocatable :: send(:), recv(:), expected(:)
  integer :: ierr, rank, nranks, i, r

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  allocate(send(n), recv(n), expected(n))
  ! Integer values: the sum is exact in any order, so it must match bit for bit.
  expected = 0
  do i = 1, n
    send(i) = real(mod(i * 7 + rank * 13, 1000) - 500)
    do r = 0, nranks - 1
      expected(i) = expected(i) + real(mod(i * 7 + r * 13, 1000) - 500)
    end do
  end do

  ierr = MPI_SUCCESS
  recv = -12345.0
  call MPI_Allreduce(send, recv, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD)
  call check('use mpi_f08, not in place, no ierror')

  recv = send
  call MPI_Allreduce(MPI_IN_PLACE, recv, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD)
  call check('use mpi_f08, MPI_IN_PLACE, no ierror')

  ierr = -1
  recv = -12345.0
  call MPI_Allreduce(send, recv, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check('use mpi_f08, not in place, with ierror')

  if (rank == 0) print '(a, i0, a)', 'allreduce_f08: PASS on ', nranks, ' ranks'
  call MPI_Finalize()

contains

  subroutine check(what)
    character(len=*), intent(in) :: what
    integer :: bad
    if (ierr /= MPI_SUCCESS) then
      print '(a, i0, 3a, i0)', 'allreduce_f08 [rank ', rank, '] FAIL: ', what, ': ierror ', ierr
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
    bad = count(recv /= expected)
    if (bad /= 0) then
      i = findloc(recv /= expected, .true., dim=1)
      print '(a, i0, 3a, i0, a, i0, a, f12.1, a, f12.1)', 'allreduce_f08 [rank ', rank, '] FAIL: ', what, ': ', bad, &
          ' wrong elements, first at ', i, ': ', recv(i), ' instead of ', expected(i)
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine check

end program allreduce_f08
