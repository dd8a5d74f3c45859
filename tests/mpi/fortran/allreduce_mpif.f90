! MPI_REAL allreduce through `include 'mpif.h'`. Open MPI's Fortran bindings call PMPI_Allreduce
! directly, so the library must wrap the Fortran symbol and translate MPI_IN_PLACE itself.
! Interception is checked from outside, through the OPTIREDUCE_REPORT file (2 calls per rank).
program allreduce_mpif
  implicit none
  include 'mpif.h'
  integer, parameter :: n = 100003
  real, allocatable :: send(:), recv(:), expected(:)
  integer :: ierr, rank, nranks, i, r

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  allocate(send(n), recv(n), expected(n))
  ! Integer values: the sum is exact in any order, so it must match bit for bit.
  expected = 0
  do i = 1, n
    send(i) = real(mod(i * 7 + rank * 13, 1000) - 500)
    do r = 0, nranks - 1
      expected(i) = expected(i) + real(mod(i * 7 + r * 13, 1000) - 500)
    end do
  end do

  recv = -12345.0
  call MPI_Allreduce(send, recv, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check('mpif.h, not in place')

  recv = send
  call MPI_Allreduce(MPI_IN_PLACE, recv, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check('mpif.h, MPI_IN_PLACE')

  if (rank == 0) print '(a, i0, a)', 'allreduce_mpif: PASS on ', nranks, ' ranks'
  call MPI_Finalize(ierr)

contains

  subroutine check(what)
    character(len=*), intent(in) :: what
    integer :: bad, ignored
    if (ierr /= MPI_SUCCESS) then
      print '(a, i0, 3a, i0)', 'allreduce_mpif [rank ', rank, '] FAIL: ', what, ': ierror ', ierr
      call MPI_Abort(MPI_COMM_WORLD, 1, ignored)
    end if
    bad = count(recv /= expected)
    if (bad /= 0) then
      i = findloc(recv /= expected, .true., dim=1)
      print '(a, i0, 3a, i0, a, i0, a, f12.1, a, f12.1)', 'allreduce_mpif [rank ', rank, '] FAIL: ', what, ': ', bad, &
          ' wrong elements, first at ', i, ': ', recv(i), ' instead of ', expected(i)
      call MPI_Abort(MPI_COMM_WORLD, 1, ignored)
    end if
  end subroutine check

end program allreduce_mpif
