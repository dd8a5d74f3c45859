! The same job in Fortran (`use mpi`): 3 MPI_REAL MPI_Allreduce, 1 MPI_REAL MPI_Iallreduce and 1
! DOUBLE PRECISION MPI_Allreduce per rank; the report must say intercepted 3, passthrough 2
! (nonblocking 1, datatype 1).
program passthrough_reasons_f
  use mpi
  implicit none
  integer, parameter :: n = 4099
  real :: send(n), recv(n)
  double precision :: one, total
  integer :: ierr, rank, nranks, i, call_number, request, ignored

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  do i = 1, n
    send(i) = real(mod(i, 97))
  end do
  do call_number = 1, 3
    call MPI_Allreduce(send, recv, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check('MPI_Allreduce')
  end do
  call MPI_Iallreduce(send, recv, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, request, ierr)
  call MPI_Wait(request, MPI_STATUS_IGNORE, ierr)
  call check('MPI_Iallreduce')
  one = 1.0d0
  call MPI_Allreduce(one, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (total /= dble(nranks)) then
    print '(a, f8.1)', 'passthrough_reasons_f: FAIL: the double sum is ', total
    call MPI_Abort(MPI_COMM_WORLD, 1, ignored)
  end if
  if (rank == 0) print '(a, i0, a)', 'passthrough_reasons_f: PASS on ', nranks, ' ranks'
  call MPI_Finalize(ierr)

contains

  subroutine check(what)
    character(len=*), intent(in) :: what
    if (ierr /= MPI_SUCCESS .or. any(recv /= real(nranks) * send)) then
      print '(3a)', 'passthrough_reasons_f: FAIL: ', what, ': wrong sum'
      call MPI_Abort(MPI_COMM_WORLD, 1, ignored)
    end if
  end subroutine check
end program passthrough_reasons_f
